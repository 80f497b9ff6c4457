"""Every kind of Python callable either registers and is called right, or is refused with advice."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ToolDefinitionError


def _call(rt: Runtime, name: str, arguments: dict[str, Any]) -> Any:
    obs = rt.call({"name": name, "arguments": arguments})
    assert obs.error is None, obs.error
    return obs.data


def _scale(value: int, factor: int) -> int:
    return value * factor


async def _add(a: int, b: int) -> int:
    return a + b


class _Adder:
    def __init__(self, base: int) -> None:
        self.base = base

    def __call__(self, a: int) -> int:
        return self.base + a


class _AsyncAdder:
    async def __call__(self, a: int) -> int:
        return a + 1000


def test_a_partial_registers_with_its_remaining_parameters() -> None:
    rt = Runtime()
    rt.tool(functools.partial(_scale, factor=3), effect="none", name="triple")
    schema = rt.catalog.get("triple").input_schema
    assert list(schema["properties"]) == ["value"]
    assert _call(rt, "triple", {"value": 5}) == 15


def test_a_keyword_bound_by_a_partial_cannot_be_overridden_by_the_model() -> None:
    rt = Runtime()
    rt.tool(functools.partial(_scale, factor=3), effect="none", name="triple")
    obs = rt.call({"name": "triple", "arguments": {"value": 5, "factor": 100}})
    assert obs.error is not None
    assert obs.error.category == "invalid_arguments"


def test_a_partial_of_a_coroutine_function_is_awaited() -> None:
    rt = Runtime()
    rt.tool(functools.partial(_add, b=1), effect="read", name="inc")
    assert _call(rt, "inc", {"a": 41}) == 42


def test_a_callable_instance_registers_from_its_call_method() -> None:
    rt = Runtime()
    rt.tool(_Adder(10), effect="read", name="add_ten")
    assert list(rt.catalog.get("add_ten").input_schema["properties"]) == ["a"]
    assert _call(rt, "add_ten", {"a": 5}) == 15


def test_an_async_callable_instance_is_awaited() -> None:
    rt = Runtime()
    rt.tool(_AsyncAdder(), effect="read", name="big_add")
    assert rt.catalog.get("big_add").is_async
    assert _call(rt, "big_add", {"a": 1}) == 1001


def test_a_callable_without_a_name_is_refused_with_advice() -> None:
    rt = Runtime()
    with pytest.raises(ToolDefinitionError, match="name="):
        rt.tool(_Adder(1), effect="read")


def test_a_sync_wrapper_made_with_wraps_around_a_coroutine_function_is_awaited() -> None:
    def logged(f: Any) -> Any:
        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            return f(*args, **kwargs)

        return inner

    @logged
    async def double(a: int) -> int:
        return a * 2

    rt = Runtime()
    rt.tool(double, effect="read")
    assert _call(rt, "double", {"a": 21}) == 42


def test_positional_only_and_var_parameters_are_refused_with_what_to_change() -> None:
    def only(a: int, /) -> int:
        return a

    def star(*args: int) -> int:
        return 0

    rt = Runtime()
    with pytest.raises(ToolDefinitionError, match=r"'a'.*(keyword|name)"):
        rt.tool(only, effect="read")
    with pytest.raises(ToolDefinitionError, match=r"\*args.*(named parameters|input_schema)"):
        rt.tool(star, effect="read")
    with pytest.raises(ToolDefinitionError, match=r"obj.*wrap the function"):
        rt.tool(len, effect="read")
