"""The mistakes a new user makes defining a tool end at definition, as a ToolDefinitionError that
names the tool, the parameter or option at fault and what to write instead: never a foreign
exception, and never a tool that registers and then fails every call the model makes."""

from __future__ import annotations

import datetime
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.errors import DuplicateToolError, ToolDefinitionError


def _define(fn: Any, **options: Any) -> None:
    with Runtime("memory://") as rt:
        rt.tool(effect="none", **options)(fn)


def test_a_default_that_does_not_fit_its_type_hint_is_refused_naming_the_parameter() -> None:
    def search(query: str, limit: int = "ten") -> list[str]:  # type: ignore[assignment]
        """Search."""
        return [query] * limit

    with pytest.raises(ToolDefinitionError) as caught:
        _define(search)
    said = str(caught.value)
    assert "search" in said and "'limit'" in said and "'ten'" in said and "\n" not in said


def test_a_none_default_under_a_hint_without_none_says_to_add_none_to_the_hint() -> None:
    def search(query: str, limit: int = None) -> list[str]:  # type: ignore[assignment]  # noqa: RUF013
        """Search."""
        return [query]

    with pytest.raises(ToolDefinitionError, match=r"'limit'.*\| None"):
        _define(search)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_float_default_json_cannot_hold_is_a_tool_definition_error(bad: float) -> None:
    def scale(x: float, factor: float = bad) -> float:
        """Scale."""
        return x * factor

    with pytest.raises(ToolDefinitionError, match=r"scale: .*'factor'.*JSON"):
        _define(scale)


def test_a_default_that_is_no_json_value_is_refused_naming_the_parameter() -> None:
    marker = object()

    def fetch(url: str, session: object = marker) -> str:
        """Fetch."""
        return url

    with pytest.raises(ToolDefinitionError, match=r"fetch: .*'session'.*JSON"):
        _define(fetch)


@given(
    st.one_of(
        st.integers(min_value=-(2**53), max_value=2**53),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=20),
        st.none(),
    )
)
def test_a_default_that_fits_its_hint_registers_and_reaches_the_tool(default: object) -> None:
    got: list[object] = []

    def echo(value: int | float | str | None = default) -> None:  # type: ignore[assignment]
        """Echo."""
        got.append(value)

    with Runtime("memory://") as rt:
        rt.tool(effect="none")(echo)
        assert rt.call(ToolCall(name="echo", arguments={})).ok
    assert got == [default]


def test_python_valued_defaults_that_have_a_json_form_still_register() -> None:
    def book(
        room: str,
        start: datetime.datetime = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        tags: tuple[str, ...] = ("a",),
        seats: set[int] = {1, 2},  # noqa: B006
    ) -> str:
        """Book."""
        return room

    with Runtime("memory://") as rt:
        rt.tool(effect="none")(book)
        assert rt.call(ToolCall(name="book", arguments={"room": "r1"})).data == "r1"


def test_a_schema_that_json_cannot_hold_is_a_tool_definition_error() -> None:
    def f(x: float) -> float:
        """F."""
        return x

    schema = {"type": "object", "properties": {"x": {"type": "number", "maximum": math.inf}}}
    with Runtime("memory://") as rt, pytest.raises(ToolDefinitionError, match=r"^t: input_schema .*JSON"):
        rt.add_tool(name="t", input_schema=schema, fn=f, effect="none")


@pytest.mark.parametrize("schema", ['{"type": "object"}', ["type", "object"], None, 3])
def test_an_input_schema_that_is_not_a_mapping_is_a_tool_definition_error(schema: Any) -> None:
    def f(x: int) -> int:
        """F."""
        return x

    with Runtime("memory://") as rt, pytest.raises(ToolDefinitionError, match=r"^t: input_schema must be"):
        rt.add_tool(name="t", input_schema=schema, fn=f, effect="none")


def test_writes_given_as_one_string_says_to_give_a_list() -> None:
    def book(room: str) -> str:
        """Book."""
        return room

    with Runtime("memory://") as rt, pytest.raises(ToolDefinitionError, match=r"writes=\['room:\{room\}'\]"):
        rt.tool(effect="write", writes="room:{room}")(book)


def test_a_misspelled_option_is_a_tool_definition_error_naming_the_option_meant() -> None:
    def book(room: str) -> str:
        """Book."""
        return room

    with Runtime("memory://") as rt:
        with pytest.raises(ToolDefinitionError, match=r"book: unknown option 'writez'.*'writes'"):
            rt.tool(effect="write", writez=["room:{room}"])(book)
        with pytest.raises(ToolDefinitionError, match=r"t: unknown option 'efect'.*'effect'"):
            rt.add_tool(name="t", input_schema={"type": "object"}, fn=book, effect="read", efect="x")


def test_registering_a_name_twice_says_how_to_register_it_apart() -> None:
    def add(a: int) -> int:
        """Add."""
        return a

    with Runtime("memory://") as rt:
        rt.tool(effect="none")(add)
        with pytest.raises(DuplicateToolError) as caught:
            rt.tool(effect="none")(add)
    said = str(caught.value)
    assert "add@1" in said and "name=" in said and "version=" in said and "\n" not in said


def test_a_lambda_is_told_to_become_a_def_since_it_cannot_carry_type_hints() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        _define(lambda city: city, name="echo")
    said = str(caught.value)
    assert said.startswith("echo: ") and "lambda" in said and "def" in said and "type hint" in said


class _Desk:
    def close_ticket(self, ticket: str) -> str:
        """Close a ticket."""
        return ticket


def test_a_method_taken_from_its_class_is_told_to_be_bound_not_to_type_self() -> None:
    with pytest.raises(ToolDefinitionError) as caught:
        _define(_Desk.close_ticket)
    said = str(caught.value)
    assert "close_ticket" in said and "'self'" in said and "_Desk().close_ticket" in said


def test_a_bound_method_registers_without_self_in_its_schema() -> None:
    with Runtime("memory://") as rt:
        rt.tool(effect="none")(_Desk().close_ticket)
        assert list(rt.catalog.get("close_ticket").input_schema["properties"]) == ["ticket"]
        assert rt.call(ToolCall(name="close_ticket", arguments={"ticket": "t-1"})).data == "t-1"


def test_a_misspelled_idempotency_is_named_next_to_the_choices() -> None:
    def pay(to: str, idempotency_key: str) -> str:
        """Pay."""
        return to

    with (
        Runtime("memory://") as rt,
        pytest.raises(ToolDefinitionError, match=r"^pay: idempotency 'nativ' not in"),
    ):
        rt.tool(effect="external", idempotency="nativ")(pay)
