"""A byte order mark before a model's output (text read from a file saved as UTF-8 with BOM, or
bytes of one) hides nothing: the output reads as it does without the mark, in every text format,
whole or streamed, with fault positions still counted in the text as given."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse
from tests.parse import samples

BOM = "\ufeff"


def _streamed(text: str, cuts: list[int]) -> object:
    stream = StreamParser()
    at = 0
    for cut in sorted(set(cuts)):
        stream.feed(text[at:cut])
        at = cut
    stream.feed(text[at:])
    return stream.finish()


@pytest.mark.parametrize("name", sorted(samples.TEXT_SAMPLES))
def test_every_text_format_after_a_byte_order_mark_reads_as_without_it(name: str) -> None:
    text = samples.TEXT_SAMPLES[name]
    plain = parse(text)
    marked = parse(BOM + text)
    assert marked.calls == plain.calls, name
    assert (marked.error, marked.content, marked.reasoning) == (plain.error, plain.content, plain.reasoning)
    assert parse((BOM + text).encode("utf-8")).calls == plain.calls
    assert call_ids(BOM + text) == call_ids(text)


@pytest.mark.parametrize(
    "text",
    [
        json.dumps({"name": "add", "arguments": {"a": 1}}),
        json.dumps([{"name": "add", "arguments": {"a": 1}}, {"name": "add", "arguments": {"a": 2}}]),
        "[add(a=1), add(a=2)]",
    ],
)
def test_a_call_written_bare_after_a_byte_order_mark_is_a_call_not_the_answer(text: str) -> None:
    marked = parse(BOM + text)
    assert marked.error is None and marked.content is None
    assert [c.arguments for c in marked.calls] == [c.arguments for c in parse(text).calls]
    assert marked.calls


def test_a_fault_after_a_byte_order_mark_is_placed_in_the_text_as_given() -> None:
    text = '{"name": "add", "arguments": {"a": 1,}}'
    plain, marked = parse(text).error, parse(BOM + text).error
    assert plain is not None and marked is not None
    assert marked.details["reason"] == plain.details["reason"]
    assert marked.details["position"] == plain.details["position"] + 1


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(samples.TEXT_SAMPLES)), data=st.data())
def test_any_chunking_of_a_marked_output_reads_as_the_whole(name: str, data: st.DataObject) -> None:
    text = BOM + samples.TEXT_SAMPLES[name]
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=6))
    assert _streamed(text, cuts) == parse(text)
