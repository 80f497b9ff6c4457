"""Hypothesis strategies for text as the world sends it, not as ``st.text()`` draws it."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["any_text", "json_values"]

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
