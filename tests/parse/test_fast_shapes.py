"""The parser's fast readings of the common shapes give what its full path gives.

``parse`` reads one OpenAI ``tool_calls`` entry, a Chat Completions or Anthropic assistant message
and a list of Responses items with plain checks (``fast_openai_entry``, ``fast_openai_message``,
``fast_anthropic_message``, ``fast_responses_items``) before the full path. Over
generated entries and messages, edge cases included (empty ids, blank names, arguments that are
not objects, content beside the calls, reasoning fields, legacy ``function_call``), whatever a
fast reading returns equals the full path's result, and ``parse`` itself always equals it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import parse
from actionspace.parse._fast import (
    fast_anthropic_message,
    fast_openai_entry,
    fast_openai_message,
    fast_responses_items,
)
from actionspace.parse._result import Collector, ParseResult
from actionspace.parse._structured import add_value


def full(value: Any) -> ParseResult:
    """The full path's reading (no fast shape tried)."""
    coll = Collector(None)
    add_value(value, coll)
    return coll.result()


ids = st.sampled_from([None, "", "call_1", "call_2", "call_1", 7, True])
names = st.sampled_from(["add", " add ", "", "  ", None, 3, "get_weather"])
arguments = st.one_of(
    st.sampled_from(['{"a": 1}', "{}", "", "[1, 2]", "5", "null", '{"a": ', "{'a': 1}", '{"a": NaN}']),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-3, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-3, 3), max_size=2).map(json.dumps),
    st.none(),
    st.just(4),
)


@st.composite
def entries(draw: st.DrawFn) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    kind = draw(st.sampled_from(["function", "function", None, "custom", "other"]))
    if kind is not None:
        entry["type"] = kind
    ident = draw(ids)
    if ident is not None or draw(st.booleans()):
        entry["id"] = ident
    function: dict[str, Any] = {"name": draw(names), "arguments": draw(arguments)}
    if draw(st.booleans()) and function["arguments"] is None:
        del function["arguments"]
    entry["function"] = draw(st.sampled_from([function, function, function, "not an object", None]))
    return entry


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {}
    role = draw(st.sampled_from(["assistant", "assistant", None, "user", "tool"]))
    if role is not None:
        message["role"] = role
    message["content"] = draw(st.sampled_from([None, None, "", "  ", "Let me check.", ["text"], 5]))
    calls = draw(st.one_of(st.lists(entries(), min_size=0, max_size=3), st.sampled_from([None, "x", {}])))
    if calls is not None or draw(st.booleans()):
        message["tool_calls"] = calls
    extra = draw(st.sampled_from([None, None, None, "reasoning_content", "function_call", "type", "refusal"]))
    if extra == "function_call":
        message[extra] = {"name": "add", "arguments": "{}"}
    elif extra == "type":
        message[extra] = "message"
    elif extra is not None:
        message[extra] = draw(st.sampled_from([None, "", "because"]))
    return message


@settings(max_examples=400)
@given(entry=entries())
def test_a_fast_reading_of_an_entry_is_the_full_paths(entry: dict[str, Any]) -> None:
    fast = fast_openai_entry(entry)
    if fast is not None:
        assert fast == full(entry)
    text = json.dumps(entry)
    assert parse(text) == full(text)


@settings(max_examples=400)
@given(message=messages())
def test_a_fast_reading_of_a_message_is_the_full_paths(message: dict[str, Any]) -> None:
    fast = fast_openai_message(message)
    if fast is not None:
        assert fast == full(message)
    assert parse(message) == full(message)
    text = json.dumps(message)
    assert parse(text) == full(text)


def test_an_empty_call_id_is_no_id_on_every_path() -> None:
    entry = {"id": "", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    assert parse(json.dumps(entry)).calls[0].id is None
    assert parse({"role": "assistant", "tool_calls": [entry]}).calls[0].id is None


inputs = st.one_of(
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-3, 3), max_size=2),
    st.sampled_from([None, "", '{"a": 1}', "[1]", 4, [1, 2]]),
)


good_names = st.sampled_from(["add", " add ", "get_weather"])
good_ids = st.sampled_from([None, "", "toolu_1", "call_2"])
good_inputs = st.dictionaries(st.sampled_from(["a", "b"]), st.integers(-3, 3), max_size=2)


@st.composite
def good_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """What a well-formed turn holds: text, and calls with a name, an id (or none) and an object."""
    if draw(st.integers(0, 3)) == 0:
        return {"type": "text", "text": draw(st.sampled_from(["", "Checking.", " two "]))}
    block: dict[str, Any] = {"type": "tool_use", "name": draw(good_names), "input": draw(good_inputs)}
    ident = draw(good_ids)
    if ident is not None:
        block["id"] = ident
    return block


@st.composite
def blocks(draw: st.DrawFn) -> Any:
    kind = draw(
        st.sampled_from(["good", "good", "tool_use", "text", "thinking", "redacted_thinking", None, "image"])
    )
    if kind == "good":
        return draw(good_blocks())
    if kind == "text":
        return {"type": "text", "text": draw(st.sampled_from(["", "  ", "Checking.", " two ", 3, None]))}
    if kind == "thinking":
        return {"type": "thinking", "thinking": draw(st.sampled_from(["", "hmm"]))}
    if kind is None:
        return draw(st.sampled_from(["bare text", 7, None, {"text": "no type"}]))
    if kind != "tool_use":
        return {"type": kind}
    block: dict[str, Any] = {"type": "tool_use", "name": draw(names), "input": draw(inputs)}
    ident = draw(ids)
    if ident is not None or draw(st.booleans()):
        block["id"] = ident
    if draw(st.booleans()):
        del block["input"]
    return block


@st.composite
def anthropic_messages(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):  # well-formed: the fast reading's own shape, ids and text varied
        return {"role": "assistant", "content": draw(st.lists(good_blocks(), min_size=1, max_size=4))}
    message: dict[str, Any] = {}
    role = draw(st.sampled_from(["assistant", "assistant", "assistant", None, "user"]))
    if role is not None:
        message["role"] = role
    message["content"] = draw(st.one_of(st.lists(blocks(), max_size=4), st.sampled_from(["text", None])))
    extra = draw(st.sampled_from([None, None, None, "type", "thinking", "tool_calls", "choices", "method"]))
    if extra == "type":
        message["type"] = draw(st.sampled_from(["message", "tool_use"]))
    elif extra is not None:
        message[extra] = draw(st.sampled_from([None, "", "x", []]))
    return message


@st.composite
def responses_items(draw: st.DrawFn) -> list[Any]:
    out: list[Any] = []
    good = draw(st.booleans())  # well-formed: calls and empty reasoning items, ids varied
    for _ in range(draw(st.integers(0, 4))):
        if good:
            if draw(st.integers(0, 3)) == 0:
                out.append({"type": "reasoning", "id": "rs_1", "summary": []})
                continue
            arguments_text = json.dumps(draw(good_inputs))
            call = {"type": "function_call", "name": draw(good_names), "arguments": arguments_text}
            good_id = draw(good_ids)
            if good_id is not None:
                call[draw(st.sampled_from(["call_id", "id"]))] = good_id
            out.append(call)
            continue
        kind = draw(st.sampled_from(["function_call", "function_call", "reasoning", "message", None]))
        if kind == "reasoning":
            item: dict[str, Any] = {"type": "reasoning", "id": "rs_1"}
            summary = draw(st.sampled_from([[], [], [{"type": "summary_text", "text": "why"}], None]))
            if summary is not None:
                item["summary"] = summary
            if draw(st.booleans()):
                item["content"] = [{"type": "reasoning_text", "text": draw(st.sampled_from(["", "so"]))}]
        elif kind == "message":
            item = {"type": "message", "content": [{"type": "output_text", "text": "Done."}]}
        elif kind is None:
            item = draw(st.sampled_from([{"name": "add"}, "text", 3, {"choices": []}]))
        else:
            item = {"type": "function_call", "name": draw(names), "arguments": draw(arguments)}
            ident = draw(ids)
            key = draw(st.sampled_from(["call_id", "call_id", "id"]))
            if ident is not None or draw(st.booleans()):
                item[key] = ident
            extra = draw(st.sampled_from([None, None, "output", "role", "status"]))
            if extra is not None:
                item[extra] = draw(st.sampled_from(["completed", "assistant", [], None]))
        out.append(item)
    return out


@settings(max_examples=500)
@given(message=anthropic_messages())
def test_a_fast_reading_of_an_anthropic_message_is_the_full_paths(message: dict[str, Any]) -> None:
    fast = fast_anthropic_message(message)
    if fast is not None:
        assert fast == full(message)
    assert parse(message) == full(message)


@settings(max_examples=500)
@given(items=responses_items())
def test_a_fast_reading_of_responses_items_is_the_full_paths(items: list[Any]) -> None:
    fast = fast_responses_items(items)
    if fast is not None:
        assert fast == full(items)
    assert parse(items) == full(items)


def test_the_fast_readings_read_the_common_shapes() -> None:
    """Not a vacuous equality: the common shapes of a session's turn do take the fast readings."""
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
        ],
    }
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 1}'},
    ]
    anthropic, responses = fast_anthropic_message(message), fast_responses_items(items)
    assert anthropic is not None and anthropic.format == "anthropic" and anthropic.content == "Checking."
    assert responses is not None and responses.format == "openai_responses"
    assert [c.id for c in (*anthropic.calls, *responses.calls)] == ["toolu_1", "call_1"]
