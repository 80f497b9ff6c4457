"""A provider's JSON completion given as text (Chat Completions, a message, one ``tool_calls`` entry, a
Responses object, an Anthropic message, an Ollama message) and cut anywhere, inside a ``null``,
``true`` or ``false`` of the completion or of its arguments included, is a cut: it parses, or it is a
``parse_error`` whose reason says where it stops (``truncated``, ``cut_off``), never ``invalid_json``
(which tells the model it wrote something wrong), and it keeps no call the whole completion does not
hold. Whole text and streamed text alike, and UTF-8 bytes cut anywhere, inside a character included.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

CUT_REASONS = {"truncated", "cut_off", "unterminated_block", "unterminated_call"}

_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text("ab é", max_size=3))
ARGUMENTS = st.dictionaries(
    st.sampled_from(["a", "on", "none", "list"]),
    st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
    max_size=4,
)


def _entry(arguments: dict[str, Any], as_text: bool) -> dict[str, Any]:
    given = json.dumps(arguments) if as_text else arguments
    return {"id": "call_1", "type": "function", "function": {"name": "set_lamp", "arguments": given}}


def _completion(kind: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": [_entry(arguments, True)], "refusal": None}
    if kind == "chat":
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls"}
        return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice], "service_tier": None}
    if kind == "message":
        return message
    if kind == "entry":
        return _entry(arguments, True)
    if kind == "responses":
        item = {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "set_lamp",
            "arguments": json.dumps(arguments),
            "status": "completed",
        }
        return {"id": "resp_1", "object": "response", "status": "completed", "output": [item], "error": None}
    if kind == "anthropic":
        block = {"type": "tool_use", "id": "toolu_1", "name": "set_lamp", "input": arguments}
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [block],
            "stop_reason": "tool_use",
            "stop_sequence": None,
        }
    # an Ollama message: its arguments an object, not text
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": _entry(arguments, False)["function"]}],
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["chat", "message", "entry", "responses", "anthropic", "ollama"]),
    ARGUMENTS,
    st.sampled_from([None, 2]),
    st.booleans(),
    st.data(),
)
def test_every_prefix_of_a_completion_given_as_text_parses_or_is_a_cut(
    kind: str, arguments: dict[str, Any], indent: int | None, compact: bool, data: st.DataObject
) -> None:
    text = json.dumps(
        _completion(kind, arguments),
        indent=indent,
        separators=(",", ":") if compact else None,
        ensure_ascii=False,
    )
    whole = parse(text)
    assert whole.error is None and len(whole.calls) == 1, whole.error
    literals = [i for i in range(len(text)) if text.startswith(("null", "true", "false"), i)]
    inside = [i + k for i in literals for k in range(1, 4)]  # a cut after n, nu, nul, t, tr...
    near = bool(inside) and data.draw(st.booleans())
    end = data.draw(st.sampled_from(inside)) if near else data.draw(st.integers(0, len(text)))
    prefix = text[:end]
    for result in (parse(prefix), _streamed(prefix, data.draw(st.integers(1, 7)))):
        assert list(result.calls) == list(whole.calls[: len(result.calls)]), prefix
        if result.error is not None:
            reason = result.error.details["reason"]
            assert reason in CUT_REASONS, (prefix[-40:], result.error.message)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["chat", "message", "entry", "responses", "anthropic", "ollama"]), ARGUMENTS, st.data()
)
def test_every_byte_prefix_of_a_completion_given_as_utf8_parses_or_is_a_cut(
    kind: str, arguments: dict[str, Any], data: st.DataObject
) -> None:
    """Bytes cut inside a character (``é`` is two bytes) were cut, not written wrong (``invalid_utf8``):
    they read as the text cut one character earlier."""
    raw = json.dumps(_completion(kind, arguments), ensure_ascii=False).encode()
    whole = parse(raw)
    assert whole.error is None and len(whole.calls) == 1, whole.error
    inside = [i for i in range(1, len(raw)) if raw[i] & 0xC0 == 0x80]  # within a character
    near = bool(inside) and data.draw(st.booleans())
    end = data.draw(st.sampled_from(inside)) if near else data.draw(st.integers(0, len(raw)))
    result = parse(raw[:end])
    assert list(result.calls) == list(whole.calls[: len(result.calls)])
    if result.error is not None:
        assert result.error.details["reason"] in CUT_REASONS, (raw[:end][-40:], result.error.message)
    assert result == parse(raw[:end].decode(errors="ignore"))  # the whole characters, read as text


def test_bytes_cut_inside_a_character_read_as_the_characters_before_it() -> None:
    cut = '{"name": "set_lamp", "arguments": {"room": "café"}}'.encode()[:-4]  # inside "é"
    assert cut.endswith(b"caf\xc3")
    result = parse(cut)
    assert result.error is not None and result.error.details["reason"] == "truncated", result.error
    answer = parse("Le café".encode()[:-1])
    assert answer.error is None and answer.content == "Le caf"
    wrong = parse(b"Le caf\xc3x")  # a broken character with text after it was written wrong
    assert wrong.error is not None and wrong.error.details["reason"] == "invalid_utf8"


def _streamed(text: str, step: int) -> Any:
    stream = StreamParser(in_reasoning=False)
    for i in range(0, len(text), step):
        stream.feed(text[i : i + step])
    return stream.finish()
