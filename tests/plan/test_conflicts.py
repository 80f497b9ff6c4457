"""The commutation rule and prefix overlap of resource patterns."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actionspace.plan import commute, conflicting, expand, overlaps

RESOURCES = st.sampled_from(
    ["fs:", "fs:/a", "fs:/a/b", "fs:/ab", "cal:1", "cal:2", "cal:", "db:x", "*", "fs:/a*"]
)
SETS = st.lists(RESOURCES, max_size=3)


def _brute(ri: list[str], wi: list[str], rj: list[str], wj: list[str]) -> bool:
    def meet(xs: list[str], ys: list[str]) -> bool:
        return any(overlaps(x, y) for x in xs for y in ys)

    return not meet(wi, rj + wj) and not meet(wj, ri)


@given(SETS, SETS, SETS, SETS)
def test_commute_is_the_seed_rule_and_symmetric(
    ri: list[str], wi: list[str], rj: list[str], wj: list[str]
) -> None:
    assert commute(ri, wi, rj, wj) == _brute(ri, wi, rj, wj)
    assert commute(ri, wi, rj, wj) == commute(rj, wj, ri, wi)


@given(SETS, SETS)
def test_reads_always_commute_with_reads(ri: list[str], rj: list[str]) -> None:
    assert commute(ri, [], rj, [])


@given(RESOURCES, RESOURCES)
def test_overlap_is_symmetric(a: str, b: str) -> None:
    assert overlaps(a, b) == overlaps(b, a)


def test_prefix_overlap_stops_at_separators() -> None:
    assert overlaps("fs:", "fs:/a/b")
    assert overlaps("fs:/a", "fs:/a/b")
    assert not overlaps("fs:/a", "fs:/ab")
    assert not overlaps("cal:1", "cal:2")
    assert overlaps("*", "anything")


def test_a_write_conflicts_with_a_read_of_the_same_resource() -> None:
    assert conflicting([], ["file:a"], ["file:a"], []) == "file:a"
    assert conflicting(["file:a"], [], [], ["file:a"]) == "file:a"
    assert conflicting([], ["file:a"], [], ["file:b"]) is None


def test_templates_expand_from_arguments_and_widen_when_unknown() -> None:
    assert expand(["file:{path}", "log:"], {"path": "a.json"}) == ("file:a.json", "log:")
    assert expand(["cal:{calendar_id}/{day}"], {"calendar_id": "c1"}) == ("cal:c1/*",)
    assert expand(["file:{path}"], {"path": "a"}, unknown=["path"]) == ("file:*",)
    widened = expand(["cal:{a}-{b}"], {"a": "x"})
    assert widened == ("cal:x-*",) and overlaps(widened[0], "cal:x-y")


def test_a_template_that_does_not_parse_widens_to_everything_after_its_first_brace() -> None:
    """A ToolSpec refuses such a template; a set built otherwise still never hides a resource."""
    assert expand(["doc:{name", "a:{x}"], {"name": "n", "x": 1}) == ("doc:*", "a:1")
