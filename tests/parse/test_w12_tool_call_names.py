"""A ``ToolCall`` built with a name that is not text is a ``parse_error`` (reason ``invalid_name``).

Its id was already held so (``invalid_id``); its name went on to the resolver, where a number or
``None`` ended the call ``internal`` and a list made ``acall`` raise ``TypeError`` (unhashable).
A caller that builds calls by hand, or a framework adapter handing over what a model produced,
gets the typed answer the parsers give a call naming no function, on every path and alone or in
a message of several (where none of the message's calls runs).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.parse import parse
from actionspace.types import Observation, ToolCall

NAMES: list[Any] = [5, None, b"add", ["add"], {"add": 1}, 1.5, True, ("add",)]


def _runtime(ran: list[int]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        ran.append(a + b)
        return a + b

    return rt


def _is_invalid_name(obs: Observation) -> bool:
    return (
        obs.status == "error"
        and obs.error is not None
        and obs.error.category == "parse_error"
        and obs.error.details.get("reason") == "invalid_name"
    )


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_parse_says_a_tool_call_without_a_text_name_names_no_function(name: Any) -> None:
    result = parse(ToolCall(name=name, arguments={"a": 1, "b": 2}, id="c1"))
    assert result.calls == ()
    assert result.error is not None and result.error.category == "parse_error"
    assert result.error.details["reason"] == "invalid_name"
    # in a list, the calls before it are kept and none after
    many = parse([ToolCall(name="add", arguments={}, id="c0"), ToolCall(name=name, arguments={}, id="c1")])
    assert [c.id for c in many.calls] == ["c0"]
    assert many.error is not None and many.error.details["reason"] == "invalid_name"


@pytest.mark.parametrize("name", NAMES, ids=repr)
def test_every_call_path_answers_a_non_text_name_as_a_parse_error(name: Any) -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    try:
        bad = ToolCall(name=name, arguments={"a": 1, "b": 2}, id="c1")
        good = ToolCall(name="add", arguments={"a": 3, "b": 4}, id="c2")
        assert _is_invalid_name(rt.call(bad))
        assert _is_invalid_name(asyncio.run(rt.acall(bad)))
        for obs in rt.call_all([good, bad]):
            assert _is_invalid_name(obs)
        for obs in asyncio.run(rt.acall_all([good, bad])):
            assert _is_invalid_name(obs)
        assert ran == []  # none of a message holding such a call ran
        assert rt.call(good).data == 7  # and the runtime goes on
    finally:
        rt.close()


@settings(max_examples=60, deadline=None)
@given(name=st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.binary(max_size=8),
                      st.lists(st.text(max_size=3), max_size=3), st.booleans()))  # fmt: skip
def test_any_non_text_name_ends_typed_through_acall(name: Any) -> None:
    ran: list[int] = []
    rt = _runtime(ran)
    try:
        obs = asyncio.run(rt.acall(ToolCall(name=name, arguments={"a": 1, "b": 2})))
        assert _is_invalid_name(obs)
        assert ran == []
    finally:
        rt.close()
