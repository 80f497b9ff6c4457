from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.observation import RULES, canonical_bytes, shape

pieces = st.sampled_from(
    [
        "\n", " ", ":", "-", "12", "a.py", "error: ", "Traceback (most recent call last):\n", "  File x\n",
        "<a href='/x'>", "</a>", "<div hidden>", "</div>", "<!--", "-->", "<![x", "<script>", "</script>",
        "<input name=q>", "<button>", "&amp;", "&#x", "é", "\x1b[31m", "\r\n", "--\n", "<", ">", "\"",
    ]
)  # fmt: skip
texts = st.lists(pieces | st.text(max_size=20), max_size=120).map("".join)


@settings(max_examples=200, deadline=None)
@given(
    text=texts, rule=st.sampled_from(sorted(RULES)), max_bytes=st.integers(256, 4096), size=st.integers(1, 50)
)
def test_every_rule_reads_any_text_within_budget_however_it_is_chunked(
    text: str, rule: str, max_bytes: int, size: int
) -> None:
    whole = shape(text, rule=rule, max_bytes=max_bytes)
    assert len(canonical_bytes(whole.data)) <= max_bytes
    chunked = shape(
        iter([text[i : i + size] for i in range(0, len(text), size)]), rule=rule, max_bytes=max_bytes
    )
    assert chunked.data == whole.data
    assert chunked.complete == whole.complete
    assert (chunked.trimming is None) == (whole.trimming is None)
    if chunked.trimming is not None:
        assert chunked.trimming.original_bytes == len(text.encode())
