"""Hypothesis strategies for text as the world sends it, not as ``st.text()`` draws it."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["any_text", "json_values", "wild_json"]

_hard = st.sampled_from(["\ud83d", "\ude00", "\udce9", "\x00", "\\", "u", "é", "\U0001f600"])
any_text = st.lists(_hard | st.characters(codec=None, exclude_categories=()), max_size=12).map("".join)
"""Any code points, unpaired surrogates and U+0000 included and often (``st.text()`` drops
surrogates even from an alphabet that holds them)."""
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
"""Plain JSON values whose strings and keys are :data:`any_text`."""


def wild_json(words: st.SearchStrategy[str], *, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON-like value a model or a client may send where another type was expected: NaN,
    infinities and integers past 64 bits included, its strings and keys drawn from ``words``."""
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.integers(min_value=2**63)
        | st.floats(allow_nan=True, allow_infinity=True)
        | words
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(words, inner, max_size=4),
        max_leaves=max_leaves,
    )
