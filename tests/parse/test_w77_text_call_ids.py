"""Raw text whose markers carry call ids (Kimi K2 ``functions.NAME:INDEX``, Mistral ``[CALL_ID]``, a
JSON call with an ``"id"``) owes an answer to each of them however its calls fail: ``call_ids`` of
the text finds what a failed ``ParseResult`` of it knows, and the ids of calls after its fault too.
A text format without ids in its text still holds none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import parse
from actionspace.parse import StreamParser, call_ids
from actionspace.parse._kimi import KIMI

A = json.dumps({"to": "bob", "text": "late"})
ARG = "<|tool_call_argument_begin|>"


def kimi(*calls: tuple[str, str]) -> str:
    """Kimi K2 text of (call id, arguments text) calls in one section."""
    body = "".join(f"{KIMI.call_open}{i}{ARG}{a}{KIMI.call_close}" for i, a in calls)
    return f"Texting Bob. {KIMI.section_open}{body}{KIMI.section_close}"


ID0, ID1, ID2 = "functions.send_sms:0", "functions.send_sms:1", "functions.send_sms:2"

# (case, raw text, the ids it carries)
TEXTS: list[tuple[str, str, list[str]]] = [
    ("kimi second call cut", kimi((ID0, A), (ID1, A[:9])), [ID0, ID1]),
    ("kimi first call broken", kimi((ID0, "{oops}")), [ID0]),
    ("kimi unterminated section", kimi((ID0, A), (ID1, A))[: -len(KIMI.section_close)], [ID0, ID1]),
    ("kimi repeated id", kimi((ID0, A), (ID0, A)), [ID0]),
    (
        "kimi without functions prefix",
        kimi(("send_sms:0", A), ("send_sms:1", "[")),
        ["send_sms:0", "send_sms:1"],
    ),
    ("kimi fault before a later call", kimi((ID0, A), (ID1, "{bad"), (ID2, A)), [ID0, ID1, ID2]),
    ("mistral call id", f"[TOOL_CALLS]send_sms[CALL_ID]a1B2c3D4e[ARGS]{A[:7]}", ["a1B2c3D4e"]),
    (
        "mistral second call id",
        f"[TOOL_CALLS]send_sms[CALL_ID]abc123XYZ[ARGS]{A}[TOOL_CALLS]send_sms[CALL_ID]def456UVW[ARGS]{{",
        ["abc123XYZ", "def456UVW"],
    ),
    (
        "hermes json with an id",
        f'<tool_call>{{"name": "send_sms", "arguments": {A}, "id": "h1"}}</tool_call><tool_call>{{"name": ',
        ["h1"],
    ),
]


@pytest.mark.parametrize(("case", "text", "ids"), TEXTS, ids=[c[0] for c in TEXTS])
def test_call_ids_of_raw_text_are_the_ids_its_markers_carry(case: str, text: str, ids: list[str]) -> None:
    result = parse(text)
    assert result.error is not None
    assert list(call_ids(text)) == ids
    known = list(call_ids(result))  # what a failed ParseResult answers: a prefix of the text's ids
    assert known == ids[: len(known)] and known


@pytest.mark.parametrize(("case", "text", "ids"), TEXTS, ids=[c[0] for c in TEXTS])
def test_the_ids_of_raw_text_are_found_inside_the_shapes_that_carry_it(
    case: str, text: str, ids: list[str]
) -> None:
    message = {"role": "assistant", "content": text}
    completion = {
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    assert list(call_ids(message)) == ids
    assert list(call_ids(completion)) == ids
    assert list(call_ids(json.dumps(completion))) == ids
    assert list(call_ids([text])) == ids


def test_the_ids_of_a_whole_kimi_text_are_its_calls_ids() -> None:
    text = kimi((ID0, A), (ID1, A))
    assert [c.id for c in parse(text).calls] == [ID0, ID1] == list(call_ids(text))


def _chunks(text: str, finish: str | None) -> list[dict[str, Any]]:
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]
    out: list[dict[str, Any]] = [
        {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": p}}]}
        for p in pieces
    ]
    if finish is not None:
        out.append(
            {
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            }
        )
    return out


@pytest.mark.parametrize("finish", ["length", None])
def test_a_cut_raw_text_stream_names_the_ids_of_the_calls_its_text_carries(finish: str | None) -> None:
    text = kimi((ID0, A), (ID1, A))
    stream = StreamParser()
    for i in range(0, len(text), 7):
        stream.feed(text[i : i + 7])
    stream.end("length")
    for result in (stream.finish(), parse(stream.output()), parse(_chunks(text, finish))):
        assert result.error is not None and result.error.details["reason"] == "cut_off"
        assert result.calls == ()
        assert list(call_ids(result)) == [ID0, ID1]
    assert list(call_ids(stream.output())) == [ID0, ID1] == list(call_ids(_chunks(text, finish)))


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "send_sms", "arguments": {"to": ',
        "<tool_call>\n<function=send_sms>\n<parameter=to>\nbob",
        "<|python_start|>[send_sms(to='bob'",
        f"{KIMI.section_open}{KIMI.call_open}0{ARG}{A}{KIMI.call_close}",  # an id naming no function
        "Just words, functions.send_sms:0 included.",
        f"<think>{kimi((ID0, A))}</think>Nothing to send.",  # markers in reasoning carry no call
        f'<tool_call>{{"name": "send_sms", "arguments": {{"text": "{KIMI.call_open}functions.x:0{ARG}"}}}}',
    ],
)
def test_raw_text_without_ids_in_its_calls_holds_no_id(text: str) -> None:
    assert call_ids(text) == ()
    assert call_ids({"role": "assistant", "content": text}) == ()


def test_call_ids_of_hostile_text_never_raises_and_stays_linear() -> None:
    text = (KIMI.call_open + "functions.f:1" + ARG) * 20_000
    ids = call_ids(text)
    assert isinstance(ids, tuple)
    assert call_ids("\x00" * 100_000) == ()


@pytest.mark.parametrize("how", ["completion", "message", "chunks", "raw stream"])
def test_a_cut_output_whose_text_call_broke_still_names_every_id_its_text_carries(how: str) -> None:
    text = kimi((ID0, A), (ID1, A[:9]))
    if how == "completion":
        message = {"role": "assistant", "content": text}
        result = parse(
            {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": message, "finish_reason": "length"}],
            }
        )
    elif how == "message":
        result = parse({"role": "assistant", "content": text, "stop_reason": "max_tokens"})
    elif how == "chunks":
        result = parse(_chunks(text, "length"))
    else:
        stream = StreamParser()
        stream.feed(text)
        stream.end("max_tokens")
        result = stream.finish()
    assert result.calls == () and result.error is not None
    assert result.error.details["reason"] == "cut_off"
    assert list(call_ids(result)) == [ID0, ID1]


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.sampled_from([ID0, ID1, ID2, "get_time:3", "0", "functions.x"]), min_size=1, max_size=4),
    cut_at=st.integers(0, 600),
    junk=st.sampled_from(["", "{bad", "[", "\x00", "<|tool_call_end|>", KIMI.call_open]),
)
def test_call_ids_of_any_kimi_text_cover_what_its_parse_knows_and_only_ids_it_writes(
    ids: list[str], cut_at: int, junk: str
) -> None:
    whole = kimi(*((i, A) for i in ids))
    text = whole[:cut_at] + junk
    found = list(call_ids(text))
    known = list(call_ids(parse(text)))
    assert found[: len(known)] == known
    assert len(found) == len(set(found))
    assert all(f"{KIMI.call_open}{i}{ARG}" in text for i in found)
    assert all(":" in i and i != "0" for i in found)
