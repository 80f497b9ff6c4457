"""JSON calls written in model text (Hermes ``<tool_call>`` blocks, Llama ``<|python_tag|>``, bare
JSON objects and lists, fenced JSON, Mistral ``[TOOL_CALLS][…]``) may carry an ``"id"``. When the
text does not parse, ``call_ids`` still names each id a call object carries at its top level: the
broken call's own (read up to its fault) and those of the calls after the fault, so the error is
answered once under each id the model sent. An ``"id"`` inside a call's arguments names no call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import parse
from actionspace.parse import StreamParser, call_ids

ARGS = {"to": "bob", "text": "late"}


def ok(ident: str, key: str = "arguments") -> str:
    return json.dumps({"name": "send_sms", key: ARGS, "id": ident})


def bad(ident: str, key: str = "arguments") -> str:
    """A call whose id comes before its arguments break."""
    return f'{{"name": "send_sms", "id": "{ident}", "{key}": {{"to": bob}}}}'


def fence(body: str) -> str:
    return f"```json\n{body}\n```\n"


# (case, raw text, the ids its calls carry)
TEXTS: list[tuple[str, str, list[str]]] = [
    (
        "hermes fault between calls",
        f"Texting. <tool_call>{ok('h1')}</tool_call><tool_call>{bad('h2')}</tool_call>"
        f"<tool_call>{ok('h3')}</tool_call>",
        ["h1", "h2", "h3"],
    ),
    (
        "hermes first block broken",
        f"<tool_call>{bad('h1')}</tool_call>\n<tool_call>\n{ok('h2')}\n</tool_call>",
        ["h1", "h2"],
    ),
    (
        "hermes broken block without id",
        f"<tool_call>{ok('h1')}</tool_call><tool_call>{{oops</tool_call><tool_call>{ok('h3')}</tool_call>",
        ["h1", "h3"],
    ),
    (
        "hermes openai entry",
        '<tool_call>{"id": "call_9", "type": "function", "function": {"name": "send_sms", "arguments": {x}}'
        f"</tool_call><tool_call>{ok('h2')}</tool_call>",
        ["call_9", "h2"],
    ),
    (
        "hermes call_id key",
        '<tool_call>{"call_id": "c7", "name": "send_sms", "arguments": [</tool_call>',
        ["c7"],
    ),
    ("llama3 python tag", f"<|python_tag|>{ok('l1', 'parameters')}; {bad('l2', 'parameters')}", ["l1", "l2"]),
    ("bare json objects", f"{ok('j1')}\n{bad('j2')}", ["j1", "j2"]),
    ("bare json list", f"[{ok('j1')}, {bad('j2')}]", ["j1", "j2"]),
    ("fenced json", fence(ok("f1")) + fence(bad("f2")) + fence(ok("f3")), ["f1", "f2", "f3"]),
    ("mistral json list", f"[TOOL_CALLS][{ok('m1')}, {bad('m2')}]</s>", ["m1", "m2"]),
    ("integer id", '<tool_call>{"id": 7, "name": "send_sms", "arguments": {x}}</tool_call>', ["7"]),
]


@pytest.mark.parametrize(("case", "text", "ids"), TEXTS, ids=[c[0] for c in TEXTS])
def test_every_id_a_failed_json_call_text_carries_is_named(case: str, text: str, ids: list[str]) -> None:
    result = parse(text)
    assert result.error is not None
    assert list(call_ids(text)) == ids
    assert list(call_ids({"role": "assistant", "content": text})) == ids
    completion = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    assert list(call_ids(completion)) == ids
    known = list(call_ids(result))  # what a failed ParseResult still knows comes first, in order
    assert known == ids[: len(known)]


@pytest.mark.parametrize(("case", "text", "ids"), TEXTS, ids=[c[0] for c in TEXTS])
def test_a_cut_output_voids_every_id_its_json_calls_carry(case: str, text: str, ids: list[str]) -> None:
    completion = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        ]
    }
    stream = StreamParser()
    stream.feed(text)
    stream.end("length")
    for result in (parse(completion), stream.finish(), parse(stream.output())):
        assert result.error is not None and result.error.details["reason"] == "cut_off"
        assert list(call_ids(result)) == ids


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "get_user", "arguments": {"id": "u1", "x": [}}</tool_call>',
        '<tool_call>{"name": "get_user", "arguments": {"id": "u1"}, "meta": {"id": "u2"}, ?}</tool_call>',
        '{"name": "get_user", "arguments": {"id": "u1", "x": oops}}',
        '<tool_call>{"name": "get_user", "arguments": "{\\"id\\": \\"u1\\"}", oops}</tool_call>',
        '<think>{"name": "x", "id": "r1", "arguments": {}}</think><tool_call>{"name": "y", "arguments": {}',
        'Words: "id": "w1" and <tool_call>{"name": "y", [</tool_call>',
    ],
)
def test_an_id_that_is_no_call_objects_own_names_no_call(text: str) -> None:
    assert parse(text).error is not None
    assert call_ids(text) == ()


def test_hostile_json_call_text_is_read_in_linear_time_and_never_raises() -> None:
    block = '<tool_call>{"id": "x", "name": "f", "arguments": {"a": "' + "\\" * 3
    assert call_ids(block * 20_000) == ("x",)
    deep = "<tool_call>" + '{"id": "d", "a": ' + "[" * 50_000
    assert call_ids(deep) == ("d",)
    assert call_ids("[" + "{" * 50_000) == ()


_IDS = st.text(alphabet="abcXYZ019_-", min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(_IDS, min_size=1, max_size=4, unique=True),
    broken=st.integers(0, 3),
    inner=st.dictionaries(st.sampled_from(["id", "call_id", "q"]), _IDS, max_size=2),
    wrap=st.sampled_from(["hermes", "fence", "mistral", "json", "llama3"]),
)
def test_ids_of_any_json_call_text_with_a_fault_are_its_call_objects_ids(
    ids: list[str], broken: int, inner: dict[str, Any], wrap: str
) -> None:
    bodies = []
    for at, ident in enumerate(ids):
        body = json.dumps({"name": "f", "id": ident, "arguments": {**ARGS, **inner}})
        bodies.append(body[:-2] + ", ?}}" if at == broken % len(ids) else body)
    text = {
        "hermes": "".join(f"<tool_call>{b}</tool_call>" for b in bodies),
        "fence": "".join(fence(b) for b in bodies),
        "mistral": "[TOOL_CALLS][" + ", ".join(bodies) + "]",
        "json": "\n".join(bodies),
        "llama3": "<|python_tag|>" + "; ".join(bodies),
    }[wrap]
    assert parse(text).error is not None
    found = list(call_ids(text))
    resyncs = wrap in ("hermes", "fence")  # a marker starts each call: the calls after a fault are read
    assert found == (ids if resyncs else ids[: broken % len(ids) + 1])
