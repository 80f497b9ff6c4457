"""A parameter whose type has no JSON Schema (a callable) is a ToolDefinitionError at registration."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from actionspace import Runtime
from actionspace.catalog.functions import spec_from_function
from actionspace.errors import ToolDefinitionError


def apply(fn: Callable[[int], int], value: int) -> int:
    return fn(value)


def test_a_callable_parameter_is_a_tool_definition_error_naming_the_tool() -> None:
    with pytest.raises(ToolDefinitionError, match="apply"):
        spec_from_function(apply, effect="none")


def test_registering_it_on_a_runtime_raises_the_same_and_registers_nothing() -> None:
    rt = Runtime("memory://")
    with pytest.raises(ToolDefinitionError, match="apply"):
        rt.tool(effect="none")(apply)
    assert "apply@1" not in rt.catalog
