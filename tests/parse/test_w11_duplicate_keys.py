"""JSON that gives one key twice (``{"amount": 1, "amount": 1000}``) is read differently by
different readers: Python's keeps the last value, others the first, a log reader may show either.
A call whose JSON does so is refused as a ``parse_error`` of reason ``duplicate_key`` — in its
arguments, nested in them, or in the call's own object — whichever way it arrives (a Chat
Completions entry as text, which the precompiled path reads, a completion, a Responses item, a
call written as text), and nothing runs. The text formats whose own syntax repeats an argument
name already refuse it the same way; JSON without a repeated key reads as before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, parse
from actionspace.parse._fast import openai_entry_parts


def _entry(arguments: str, *, function_twice: bool = False, call_id: str = "c1") -> str:
    function = '{"name": "pay", "arguments": ' + json.dumps(arguments) + "}"
    head = '{"id": ' + json.dumps(call_id) + ', "type": "function", '
    if function_twice:
        return head + '"function": {"name": "noop", "arguments": "{}"}, "function": ' + function + "}"
    return head + '"function": ' + function + "}"


DUPLICATED_ARGUMENTS = [
    '{"to": "bob", "amount": 1, "amount": 1000}',
    '{"to": "bob", "amount": 1000, "to": "eve"}',
    '{"to": "bob", "amount": 5, "memo": {"note": "a", "note": "b"}}',
    '{"to": "bob", "amount": 5, "memo": [{"n": 1, "n": 2}]}',
    '{"to": "bob:x", "amount": 1, "amount": 1000}',
    '{"to" : "bob" , "amount" : 1 , "amount" : 2}',
    '{"to": "bob", "amount": 1, "am\\u006funt": 2}',
]


def _reason(raw: Any) -> tuple[int, str | None]:
    result = parse(raw)
    error = result.error
    return len(result.calls), None if error is None else error.details.get("reason")


@pytest.mark.parametrize("arguments", DUPLICATED_ARGUMENTS)
def test_a_key_given_twice_in_the_arguments_is_refused_in_every_shape(arguments: str) -> None:
    entry = json.loads(_entry(arguments))
    completion = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [entry]},
                "finish_reason": "tool_calls",
            }
        ],
    }
    item = {"type": "function_call", "call_id": "fc_1", "name": "pay", "arguments": arguments}
    responses = {"object": "response", "status": "completed", "output": [item]}
    hermes = '<tool_call>{"name": "pay", "arguments": ' + arguments + "}</tool_call>"
    for shape, raw in {
        "entry text": _entry(arguments),
        "entry": entry,
        "completion": completion,
        "responses": responses,
        "hermes text": hermes,
    }.items():
        assert _reason(raw) == (0, "duplicate_key"), shape
    assert openai_entry_parts(_entry(arguments)) is None  # the precompiled path leaves it to parse


def test_a_key_given_twice_in_the_call_object_is_refused() -> None:
    raw = _entry('{"to": "bob", "amount": 1}', function_twice=True)
    assert _reason(raw) == (0, "duplicate_key")
    assert openai_entry_parts(raw) is None


@pytest.mark.parametrize("call", ["acall", "call", "session"])
@pytest.mark.parametrize("arguments", DUPLICATED_ARGUMENTS[:2] + DUPLICATED_ARGUMENTS[5:])
def test_nothing_is_paid_for_a_call_that_gives_a_key_twice(call: str, arguments: str) -> None:
    import asyncio

    paid: list[tuple[str, int]] = []
    with Runtime("memory://", recover_on_start=False) as rt:

        @rt.tool(effect="none")
        def pay(to: str, amount: int, memo: Any = None) -> str:
            paid.append((to, amount))
            return "paid"

        raw = _entry(arguments)
        for _ in range(2):  # the second call of a tool in a run is the precompiled path's
            if call == "acall":
                obs = asyncio.run(rt.acall(raw, run_id="r1"))
            elif call == "call":
                obs = rt.call(raw, run_id="r1")
            else:
                obs = rt.session(run_id="r1").handle(raw).observations[0]
            assert obs.status == "error" and obs.error is not None
            assert (obs.error.category, obs.error.details.get("reason")) == ("parse_error", "duplicate_key")
        assert paid == []


_keys = st.text(alphabet="abcdef:", min_size=1, max_size=4)
_values = st.one_of(st.integers(-5, 5), st.text(alphabet="xy: ", max_size=4), st.booleans(), st.none())


@settings(max_examples=150, deadline=None)
@given(
    arguments=st.dictionaries(_keys, _values, min_size=1, max_size=5),
    again=st.integers(0, 10),
    value=_values,
)
def test_the_precompiled_read_refuses_what_the_parser_refuses(
    arguments: dict[str, Any], again: int, value: Any
) -> None:
    text = json.dumps(arguments)
    plain = _entry(text)
    assert _reason(plain) == (1, None)
    read = openai_entry_parts(plain)
    assert read is not None and read[2] == arguments
    key = sorted(arguments)[again % len(arguments)]
    doubled = text[:-1] + ", " + json.dumps(key) + ": " + json.dumps(value) + "}"
    assert _reason(_entry(doubled)) == (0, "duplicate_key")
    assert openai_entry_parts(_entry(doubled)) is None
