"""``normalize`` loses nothing silently: keys that collide once written as text are all kept, and
a value cut for its nesting (or an integer too long to print) makes the observation incomplete."""

from __future__ import annotations

import enum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import actionspace._canonical as canonical
from actionspace import Runtime
from actionspace._canonical import canonical_text, normalize
from actionspace.observation import shape
from actionspace.observation.rules.json import project


class _Level(enum.IntEnum):
    LOW = 1


class _Same:
    """Distinct objects that all print alike."""

    def __repr__(self) -> str:
        return "same"

    __str__ = __repr__


class _Twin(str):
    """Equal only to itself: two of them with one text are two keys of one dict."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        return self is other


def _deep(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"n": value, "tags": {"s"}}
    return value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_an_int_key_and_its_text_as_a_string_key_are_both_kept() -> None:
    plain = normalize({1: "a", "1": "b"})
    assert sorted(plain.values()) == ["a", "b"]
    assert "1" in plain and len(plain) == 2


def test_keys_of_many_kinds_writing_one_text_are_all_kept() -> None:
    first, second = _Same(), _Same()
    value = {1: "int", "1": "str", _Level.LOW.name: "name", first: "x", second: "y", "same": "z"}
    plain = normalize(value)
    assert sorted(plain.values()) == sorted(value.values())
    assert canonical_text(plain)  # still plain JSON


def test_a_distinct_key_never_replaces_a_string_key_that_reads_like_it() -> None:
    # the name a colliding key would get is itself taken by a later string key
    plain = normalize({1: "a", "1": "b", "1 (str)": "c", "1 (str 2)": "d"})
    assert sorted(plain.values()) == ["a", "b", "c", "d"]


def test_many_keys_printing_alike_are_all_kept() -> None:
    value = {_Same(): i for i in range(2000)}
    plain = normalize(value)
    assert sorted(plain.values()) == list(range(2000))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.one_of(
            st.integers(-5, 5), st.sampled_from(["0", "1", "-1", "1 (int)", "1 (str)", "null"]), st.none()
        ),
        st.integers(),
        max_size=8,
    )
)
def test_every_value_of_a_mapping_survives_normalization(value: dict[Any, int]) -> None:
    plain = normalize(value)
    assert sorted(plain.values()) == sorted(value.values())


def test_a_projection_of_keys_that_print_alike_keeps_both() -> None:
    a, b = _Twin("k"), _Twin("k")
    value = {a: "x" * 400, b: "y" * 400}
    data = project(value, 600, normalized=False)
    assert len(data) == 2


def test_nesting_cut_is_reported_by_normalize_checked() -> None:
    plain, cut = canonical.normalize_checked(_deep(300))
    assert cut is True
    assert "leaf" not in _leaves(plain)
    assert canonical.normalize_checked(_deep(10)) == (normalize(_deep(10)), False)


def test_an_integer_too_long_to_print_is_reported_cut() -> None:
    _, cut = canonical.normalize_checked({"n": 10**5000, "s": {1}})
    assert cut is True


def test_an_observation_of_a_result_cut_for_its_nesting_says_it_is_incomplete() -> None:
    shaped = shape(_deep(300), max_bytes=1_000_000)
    assert shaped.complete is False
    assert shaped.trimming is not None and shaped.trimming.rule == "json"


def test_a_list_too_deep_for_the_encoder_is_an_incomplete_observation() -> None:
    value: Any = "leaf"
    for _ in range(5000):
        value = [value]
    shaped = shape(value)
    assert shaped.complete is False


def test_a_tool_result_cut_for_its_nesting_reaches_the_model_marked_incomplete() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def deep() -> Any:
        """A deeply nested result."""
        return _deep(300)

    @rt.tool(effect="read")
    def keyed() -> Any:
        """A result whose keys collide as text."""
        return {1: "a", "1": "b"}

    try:
        obs = rt.call({"name": "deep", "arguments": {}})
        keys = rt.call({"name": "keyed", "arguments": {}})
    finally:
        rt.close()
    assert obs.status == "ok" and obs.complete is False
    assert keys.status == "ok" and sorted(keys.data.values()) == ["a", "b"]


def test_a_shallow_result_stays_complete() -> None:
    shaped = shape({"a": {1, 2}, "b": [1, 2]})
    assert shaped.complete is True and shaped.trimming is None
