from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace.adapters import python as python_adapter
from actionspace.catalog import RetryPolicy, ToolSpec
from actionspace.errors import ActionError, ToolError
from actionspace.execution.errors import KNOWN_EXCEPTIONS, map_exception
from actionspace.execution.executor import Executor, Failed

SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
ONCE = RetryPolicy(max_attempts=1, deadline_s=5.0)


def _instance(exc_type: type[BaseException]) -> BaseException:
    return exc_type() if exc_type is asyncio.CancelledError else exc_type("boom")


@pytest.mark.parametrize(("exc_type", "read", "write"), KNOWN_EXCEPTIONS)
def test_every_known_python_exception_maps_to_its_category_with_and_without_side_effects(
    exc_type: type[BaseException], read: str, write: str
) -> None:
    exc = _instance(exc_type)
    assert map_exception(exc, side_effects=False).category == read
    assert map_exception(exc, side_effects=True).category == write
    assert map_exception(exc, side_effects=True).vendor_code == exc_type.__name__


def test_a_tool_error_keeps_its_own_error_and_anything_else_is_unclassified() -> None:
    raised = ToolError("conflict", "slot taken", alternatives=["16:00"])
    # the same error, each field as the stores write it
    assert map_exception(raised, side_effects=True) == raised.error
    other = map_exception(KeyError("calendar"), side_effects=False)
    assert (other.category, other.retryable, other.vendor_code) == ("unclassified", False, "KeyError")


def test_the_python_adapter_is_the_same_mapping() -> None:
    assert python_adapter.map_exception is map_exception
    assert python_adapter.KNOWN_EXCEPTIONS is KNOWN_EXCEPTIONS


def test_the_executor_applies_the_mapper_it_was_handed() -> None:
    seen: list[tuple[str, bool]] = []

    def mapper(exc: BaseException, *, side_effects: bool) -> ActionError:
        seen.append((type(exc).__name__, side_effects))
        return ActionError.of("permanent", "mapped by the caller")

    def fails() -> None:
        raise ValueError("vendor says no")

    spec = ToolSpec(name="t", input_schema=SCHEMA, fn=fails, effect="write", retry=ONCE)
    executor = Executor(map_error=mapper)
    try:
        outcomes = [executor.run(spec, {}), asyncio.run(executor.arun(spec, {}))]
    finally:
        executor.close()
    assert [o.error.category for o in outcomes if isinstance(o, Failed)] == ["permanent", "permanent"]
    assert seen == [("ValueError", True), ("ValueError", True)]
