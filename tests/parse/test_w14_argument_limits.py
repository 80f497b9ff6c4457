"""Arguments past what JSON decoding can read — an integer of more digits than Python converts, an
array nested past the interpreter's recursion limit — end as a ``parse_error`` that says so, in
every format alike: ``too_deep`` for the nesting, ``invalid_number`` for the integer. The model
reads this message to fix its call; ``cannot be decoded (ValueError)`` told it nothing, and the
interpreter's own advice (``use sys.set_int_max_str_digits()``) is none it can follow."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse

LIMIT = sys.get_int_max_str_digits()


def _carriers(arguments: str) -> dict[str, Any]:
    """One call whose arguments JSON text is ``arguments``, in each shape that carries it so."""
    entry = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": arguments}}
    return {
        "chat": {"role": "assistant", "content": None, "tool_calls": [entry]},
        "chat_json": json.dumps({"role": "assistant", "content": None, "tool_calls": [entry]}),
        "responses": [{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": arguments}],
        "hermes": '<tool_call>{"name": "f", "arguments": ' + arguments + "}</tool_call>",
        "mistral": '[TOOL_CALLS][{"name": "f", "arguments": ' + arguments + "}]",
    }


def _streamed(arguments: str) -> StreamParser:
    stream = StreamParser()
    entry = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": arguments},
    }
    stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [entry]}, "finish_reason": None}]})
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return stream


def _check(arguments: str, reason: str, words: str) -> None:
    results = {name: parse(raw) for name, raw in _carriers(arguments).items()}
    results["stream"] = _streamed(arguments).finish()
    for name, result in results.items():
        assert result.calls == (), name
        error = result.error
        assert error is not None and error.category == "parse_error" and error.recovery, name
        assert error.details["reason"] == reason, (name, error.message)
        assert words in error.message, (name, error.message)
        assert "ValueError" not in error.message and "RecursionError" not in error.message, name
        assert "sys.set_int_max_str_digits" not in error.message, name


@pytest.mark.parametrize("digits", [LIMIT + 1, LIMIT * 3])
def test_an_integer_too_long_to_read_says_so(digits: int) -> None:
    _check('{"a": ' + "7" * digits + "}", "invalid_number", "digits")


@pytest.mark.parametrize("depth", [50_000, 400_000])
def test_arguments_nested_past_the_recursion_limit_say_so(depth: int) -> None:
    _check('{"a": ' + "[" * depth + "]" * depth + "}", "too_deep", "nested too deeply")


def test_an_integer_within_the_limit_still_reads() -> None:
    for name, raw in _carriers('{"a": ' + "7" * LIMIT + "}").items():
        result = parse(raw)
        assert result.error is None, name
        assert result.calls[0].arguments == {"a": int("7" * LIMIT)}, name


@settings(max_examples=25, deadline=None)
@given(extra=st.integers(1, 2000), negative=st.booleans(), key=st.text(min_size=1, max_size=8))
def test_any_too_long_integer_is_invalid_number(extra: int, negative: bool, key: str) -> None:
    number = ("-" if negative else "") + "9" * (LIMIT + extra)
    raw = _carriers("{" + json.dumps(key) + ": " + number + "}")["chat"]
    result = parse(raw)
    assert result.error is not None and result.error.details["reason"] == "invalid_number"
