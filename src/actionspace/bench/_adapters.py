"""The framework adapters' rows: each framework's own tool invocation, with the tool governed by actionspace.

Row ``actionspace.adapter.<framework>.<api>.async_tool`` calls ``add_async`` through the same API
as the framework's peer row (``openai_agents.on_invoke_tool.async_tool``,
``pydantic_ai.tool_manager.handle_call.async_tool``, ``langgraph.toolnode.ainvoke.async_tool``),
but the tool is the adapter's: the call runs the whole in-memory pipeline and the framework gets
the ``render-v2`` text. The difference between the two rows is what governing the framework's
tool calls costs; the difference to ``actionspace.acall.async_tool`` is the adapter's own glue.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from actionspace.bench._timing import Pass
from actionspace.bench._workload import ARGS_DICTS, ARGS_JSON, EXPECTED, VARIANTS, add_async

__all__ = ["FRAMEWORKS", "run_adapter_rows"]

PREFIX = "actionspace.adapter."
_CALLS = 5000


def _runtime() -> Any:
    from actionspace.runtime import Runtime

    rt = Runtime(store="memory://")
    rt.tool(effect="none")(add_async)
    return rt


def _data(text: Any) -> Any:
    return json.loads(str(text))["data"]


async def _openai_agents(p: Pass) -> None:
    from agents import FunctionTool
    from agents.tool_context import ToolContext

    from actionspace.adapters.openai_agents import governed_tools

    with _runtime() as rt:
        [tool] = [t for t in governed_tools(rt) if isinstance(t, FunctionTool) and t.name == "add_async"]

        def invoke(i: int) -> Any:
            args = ARGS_JSON[i % VARIANTS]
            ctx = ToolContext(
                context=None, tool_name=tool.name, tool_call_id=f"call_{i}", tool_arguments=args
            )
            return tool.on_invoke_tool(ctx, args)

        await p.aio(
            f"{PREFIX}openai_agents.on_invoke_tool.async_tool", invoke, _CALLS, extract=_data, expect=EXPECTED
        )


async def _pydantic_ai(p: Pass) -> None:
    from pydantic_ai import RunContext
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.usage import RunUsage

    from actionspace.adapters.pydantic_ai import GovernedToolset

    with _runtime() as rt:
        toolset = GovernedToolset(rt).toolset
        ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        manager = await ToolManager(toolset).for_run_step(ctx)
        await p.aio(
            f"{PREFIX}pydantic_ai.tool_manager.handle_call.async_tool",
            lambda i: manager.handle_call(ToolCallPart("add_async", ARGS_DICTS[i % VARIANTS])),
            _CALLS,
            extract=_data,
            expect=EXPECTED,
        )


async def _langgraph(p: Pass) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.prebuilt import ToolNode
    from langgraph.runtime import Runtime as GraphRuntime

    from actionspace.adapters.langgraph import governed_tools

    with _runtime() as rt:
        node = ToolNode(governed_tools(rt))
        config: Any = {"configurable": {"__pregel_runtime": GraphRuntime()}}
        states = [
            {
                "messages": [
                    AIMessage(
                        content="",
                        tool_calls=[{"name": "add_async", "args": d, "id": "c", "type": "tool_call"}],
                    )
                ]
            }
            for d in ARGS_DICTS
        ]

        def content(out: Any) -> Any:
            return _data(out["messages"][0].content)

        await p.aio(
            f"{PREFIX}langgraph.toolnode.ainvoke.async_tool",
            lambda i: node.ainvoke(states[i % VARIANTS], config),
            _CALLS // 5,
            extract=content,
            expect=EXPECTED,
        )


FRAMEWORKS: dict[str, tuple[str, Callable[[Pass], Coroutine[Any, Any, None]]]] = {
    "openai_agents": ("agents", _openai_agents),
    "pydantic_ai": ("pydantic_ai", _pydantic_ai),
    "langgraph": ("langgraph", _langgraph),
}
"""Framework → (the module that must import, the coroutine that measures its row)."""


def run_adapter_rows(p: Pass) -> None:
    """Measure each installed framework's governed row; a missing framework is skipped."""
    import asyncio
    import importlib

    async def main() -> None:
        for name, (module, measure) in FRAMEWORKS.items():
            if not p.wants_any(f"{PREFIX}{name}"):
                continue
            try:
                importlib.import_module(module)
            except ImportError as exc:
                p.skip(f"{PREFIX}{name}", f"{module} is not installed ({exc.name})")
                continue
            try:
                await measure(p)
            except Exception as exc:
                p.fail(f"{PREFIX}{name}", exc)

    asyncio.run(main())
