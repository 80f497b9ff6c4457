"""The vectorised permission check decides exactly as ``authorize`` does at call time."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery import CandidateIndex
from actionspace.discovery._scopes import ScopeTable
from actionspace.policy.principal import Principal, authorize
from actionspace.validation.verdicts import Accepted

_SCOPE_CHARS = st.sampled_from("rw:ab_*?[]!\U0010ffff")
scope = st.text(_SCOPE_CHARS, min_size=0, max_size=6)
pattern = st.one_of(
    scope,
    st.sampled_from(["*", "r*", "r:*", "w:a*", "r:a", "[rw]:*", "?:b", "*:a", "r\U0010ffff*"]),
)


@settings(max_examples=200, deadline=None)
@given(
    tools=st.lists(st.lists(scope, min_size=0, max_size=3), min_size=1, max_size=12),
    patterns=st.lists(pattern, min_size=0, max_size=4),
)
def test_the_permission_mask_equals_authorize_for_every_tool(
    tools: list[list[str]], patterns: list[str]
) -> None:
    principal = Principal(id="p", scopes=tuple(patterns))
    mask = ScopeTable(tools).permitted(patterns)
    for scopes, allowed in zip(tools, mask.tolist(), strict=True):
        spec = ToolSpec(name="t", effect="read", scopes=tuple(scopes))
        assert allowed == isinstance(authorize(spec, principal), Accepted), (scopes, patterns)


def test_prefix_patterns_use_the_sorted_range_and_keep_exact_boundaries() -> None:
    table = ScopeTable([["read:a"], ["read:"], ["reaD:x"], ["read"], ["read:\U0010ffffz"], ["write:read:x"]])
    assert table.permitted(["read:*"]).tolist() == [True, True, False, False, True, False]
    assert table.permitted([]).tolist() == [False] * 6


def test_an_index_over_many_tools_permits_exactly_what_authorize_accepts() -> None:
    specs = [
        ToolSpec(name=f"t{i}", effect=("read", "write", "external")[i % 3], scopes=None if i % 7 else ())
        for i in range(300)
    ]
    index = CandidateIndex(specs)
    for scopes in (("read:*",), ("write:t1*", "external:t2?"), ("*",), ("[re]*:t3*",), ()):
        principal = Principal(id="p", scopes=scopes)
        expected = [isinstance(authorize(s, principal), Accepted) for s in specs]
        assert index.permitted(principal).tolist() == expected, scopes
