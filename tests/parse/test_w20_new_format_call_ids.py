"""The JSON calls of Jamba, MiniMax-M1, Granite (3.0 and 3.1), InternLM2 and Phi-4-mini may carry an
``"id"``, as a Hermes body may: a provider that read such text holds one call per id and refuses the
next request unless each is answered. When the text fails (a call broken before its end, a cut),
``call_ids`` of it, of a message holding it and of a stream fed it names every id its calls wrote,
the broken call's own and the later calls' too, where a marker starts each call (a JSON list stops
at its fault). Seed-OSS and MiniMax-M2 write no ids: their text carries none.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, call_ids, parse


def call(ident: str, arguments: str = '{"to": "bob"}') -> str:
    return f'{{"name": "send_sms", "id": "{ident}", "arguments": {arguments}}}'


BROKEN = '{"to": oops}'  # the id comes before the break: the call names it

# (case, failing text, the ids it carries, format)
TEXTS: list[tuple[str, str, list[str], str]] = [
    (
        "minimax first line broken",
        f"<tool_calls>\n{call('m1', BROKEN)}\n{call('m2')}\n</tool_calls>",
        ["m1", "m2"],
        "minimax",
    ),
    (
        "minimax second block after a fault",
        f"<tool_calls>\n{call('m1', BROKEN)}\n</tool_calls> and <tool_calls>\n{call('m3')}\n</tool_calls>",
        ["m1", "m3"],
        "minimax",
    ),
    (
        "minimax cut in its second call",
        f"<tool_calls>\n{call('m1')}\n{call('m2')[:-12]}",
        ["m1", "m2"],
        "minimax",
    ),
    (
        "jamba list broken in its second call",
        f"<tool_calls>[{call('j1')}, {call('j2', BROKEN)}, {call('j3')}]</tool_calls>",
        ["j1", "j2"],
        "jamba",
    ),
    (
        "jamba block after a broken block",
        f"<tool_calls>[{call('j1', BROKEN)}]</tool_calls><tool_calls>[{call('j2')}]</tool_calls>",
        ["j1", "j2"],
        "jamba",
    ),
    (
        "granite 3.0 list after a broken list",
        f"<|tool_call|>[{call('g1', BROKEN)}] <|tool_call|>[{call('g2')}]",
        ["g1", "g2"],
        "granite",
    ),
    (
        "granite 3.1 list after a broken list",
        f"<tool_call>[{call('g1', BROKEN)}]<tool_call>[{call('g2')}]",
        ["g1", "g2"],
        "granite",
    ),
    (
        "internlm action after a broken action",
        f"<|action_start|><|plugin|>\n{call('i1', BROKEN)}<|action_end|>"
        f"<|action_start|><|plugin|>\n{call('i2')}<|action_end|>",
        ["i1", "i2"],
        "internlm",
    ),
    (
        "internlm call id under call_id",
        '<|action_start|><|plugin|>\n{"name": "send_sms", "call_id": "i7", "parameters": {"to": }}',
        ["i7"],
        "internlm",
    ),
    (
        "phi4 list cut in its second call",
        f"functools[{call('p1')}, {call('p2')[:-5]}",
        ["p1", "p2"],
        "phi4_mini",
    ),
]


@pytest.mark.parametrize(("case", "text", "ids", "fmt"), TEXTS, ids=[c[0] for c in TEXTS])
def test_the_ids_of_a_failed_new_format_text_are_the_ids_its_calls_wrote(
    case: str, text: str, ids: list[str], fmt: str
) -> None:
    result = parse(text)
    assert result.error is not None and result.format == fmt
    assert list(call_ids(text)) == ids
    assert list(call_ids({"role": "assistant", "content": text})) == ids
    known = list(call_ids(result))  # what a failed ParseResult still knows: a prefix of them
    assert known == ids[: len(known)]


@pytest.mark.parametrize(("case", "text", "ids", "fmt"), TEXTS, ids=[c[0] for c in TEXTS])
def test_a_stream_of_a_failed_new_format_text_names_the_same_ids(
    case: str, text: str, ids: list[str], fmt: str
) -> None:
    stream = StreamParser(in_reasoning=False)
    for at in range(0, len(text), 7):
        stream.feed(text[at : at + 7])
    assert list(stream.call_ids()) == ids
    stream.end("length")  # a cut voids every call: each id is still owed an answer
    assert stream.finish().error is not None
    assert list(call_ids(stream.output())) == ids


@pytest.mark.parametrize(
    "text",
    [
        "<seed:tool_call>\n<function=send_sms>\n<parameter=to>bob</parameter>\n</function>\n<function=f><para",
        '<minimax:tool_call>\n<invoke name="send_sms">\n<parameter name="id">x1</parameter>\n</invoke>\n'
        '<invoke name="f"><parameter name="to">',
    ],
)
def test_the_xml_formats_write_no_ids(text: str) -> None:
    result = parse(text)
    assert result.error is not None and result.error.details["reason"] == "truncated"
    assert call_ids(text) == ()  # an "id" parameter is an argument, never the call's id


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text("abcdefgh0123456789", min_size=1, max_size=8), min_size=1, max_size=4, unique=True))
def test_every_id_of_a_minimax_block_broken_at_its_first_call_is_named(ids: list[str]) -> None:
    lines = [call(ids[0], BROKEN), *(call(i) for i in ids[1:])]
    text = "<tool_calls>\n" + "\n".join(lines) + "\n</tool_calls>"
    assert parse(text).error is not None
    assert list(call_ids(text)) == ids
    assert list(call_ids(json.dumps({"role": "assistant", "content": text}))) == ids
