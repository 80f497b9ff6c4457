"""The parser's fast readings of the common shapes give what its full path gives.

``parse`` reads one OpenAI ``tool_calls`` entry and one Chat Completions assistant message with
plain dict checks (``fast_openai_entry``, ``fast_openai_message``) before the full path. Over
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
from actionspace.parse._result import Collector, ParseResult
from actionspace.parse._structured import add_value, fast_openai_entry, fast_openai_message


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
