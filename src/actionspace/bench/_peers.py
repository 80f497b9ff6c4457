"""Peer frameworks, each driven in-process through the entry point its own tool calls go through.

No model and no network: the same ``add`` / ``add_async`` / ``slow`` tools are registered with each
framework and called with the same arguments as every other row. Peers are imported dynamically
(they are the optional ``bench`` extra); a missing package marks its rows skipped, never a crash.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable, Coroutine
from typing import Any

from actionspace.bench._timing import Pass
from actionspace.bench._workload import ARGS_DICTS, ARGS_JSON, BATCH, EXPECTED, VARIANTS, add, add_async, slow

__all__ = ["MODULES", "PEERS", "run_peer"]

_INSTALL = "install the bench extra: pip install 'actionspace[bench]'"

_SLOW_PEER_CALLS = 5000
"""Timed calls per row (at scale 1) for peers near 1 ms a call: enough for a stable median."""


def _module(name: str) -> Any:
    return importlib.import_module(name)


def _same(value: Any) -> Any:
    return value


# ---------------------------------------------------------------- MCP SDK
def _mcp_result(r: Any) -> dict[str, Any]:
    error = getattr(r, "is_error", getattr(r, "isError", None))
    content = getattr(r, "structured_content", getattr(r, "structuredContent", None))
    return {"is_error": error, "structured": content}


_MCP_OK = {"is_error": False, "structured": {"result": EXPECTED}}


async def _mcp_rows(p: Pass, label: str, client: Any) -> None:
    await p.aio(
        f"{label}.sync_tool",
        lambda i: client.call_tool("add", ARGS_DICTS[i % VARIANTS]),
        _SLOW_PEER_CALLS,
        extract=_mcp_result,
        expect=_MCP_OK,
    )
    await p.aio(
        f"{label}.async_tool",
        lambda i: client.call_tool("add_async", ARGS_DICTS[i % VARIANTS]),
        _SLOW_PEER_CALLS,
        extract=_mcp_result,
        expect=_MCP_OK,
    )

    async def batch() -> list[Any]:
        return await asyncio.gather(*(client.call_tool("slow", {"x": i}) for i in range(BATCH)))

    await p.abatch(f"batch.{label}.gather_call_tool", batch)


async def _mcp_2x(p: Pass, mcp: Any) -> None:
    server = _module("mcp.server.mcpserver").MCPServer("actionspace-bench")
    for fn in (add, add_async, slow):
        server.tool()(fn)
    # legacy: memory streams + JSON-RPC framing + initialize handshake; auto: in-process dispatcher.
    for mode, label in (("legacy", "mcp.memory_streams_jsonrpc"), ("auto", "mcp.inproc_direct")):
        if not p.wants_any(label):
            continue
        try:
            async with mcp.Client(server, mode=mode) as client:
                await _mcp_rows(p, label, client)
        except Exception as exc:
            p.fail(label, exc)


async def _mcp_1x(p: Pass) -> None:
    # FastMCP logs every request at INFO by default; that is console I/O, not protocol overhead.
    server = _module("mcp.server.fastmcp").FastMCP("actionspace-bench", log_level="WARNING")
    for fn in (add, add_async, slow):
        server.tool()(fn)
    connect = _module("mcp.shared.memory").create_connected_server_and_client_session
    label = "mcp.memory_streams_jsonrpc"
    if p.wants_any(label):
        try:
            async with connect(server._mcp_server) as client:
                await _mcp_rows(p, label, client)
        except Exception as exc:
            p.fail(label, exc)
    p.skip("mcp.inproc_direct", "the in-process dispatcher needs mcp>=2")


async def run_mcp(p: Pass) -> None:
    """MCP SDK: an in-memory client session calling the server's tools."""
    mcp = _module("mcp")
    if hasattr(mcp, "Client"):
        await _mcp_2x(p, mcp)
    else:
        await _mcp_1x(p)


# ---------------------------------------------------------------- Pydantic AI
async def run_pydantic_ai(p: Pass) -> None:
    """Pydantic AI: ``ToolManager.handle_call`` (argument validation, hooks, retries, execution)."""
    messages = _module("pydantic_ai.messages")
    toolset = _module("pydantic_ai.toolsets").FunctionToolset([add, add_async, slow])
    ctx = _module("pydantic_ai").RunContext(
        deps=None,
        model=_module("pydantic_ai.models.test").TestModel(),
        usage=_module("pydantic_ai.usage").RunUsage(),
    )
    manager = await _module("pydantic_ai.tool_manager").ToolManager(toolset).for_run_step(ctx)
    part = messages.ToolCallPart
    label = "pydantic_ai.tool_manager.handle_call"
    await p.aio(
        f"{label}.sync_tool",
        lambda i: manager.handle_call(part("add", ARGS_DICTS[i % VARIANTS])),
        10000,
        extract=_same,
        expect=EXPECTED,
    )
    await p.aio(
        f"{label}.async_tool",
        lambda i: manager.handle_call(part("add_async", ARGS_DICTS[i % VARIANTS])),
        10000,
        extract=_same,
        expect=EXPECTED,
    )
    await p.aio(
        f"{label}.async_tool.json_args",
        lambda i: manager.handle_call(part("add_async", ARGS_JSON[i % VARIANTS])),
        10000,
        extract=_same,
        expect=EXPECTED,
    )

    async def batch() -> list[Any]:
        return await asyncio.gather(*(manager.handle_call(part("slow", {"x": i})) for i in range(BATCH)))

    await p.abatch(f"batch.{label}.gather", batch)


# ---------------------------------------------------------------- LangGraph
def _tool_message(r: Any) -> dict[str, Any]:
    msgs = r["messages"]
    return {"n": len(msgs), "status": msgs[0].status, "content": msgs[0].content}


async def run_langgraph(p: Pass) -> None:
    """LangGraph: the prebuilt ``ToolNode.ainvoke`` on an AI message carrying the tool calls."""
    ai_message = _module("langchain_core.messages").AIMessage
    structured = _module("langchain_core.tools").StructuredTool
    node = _module("langgraph.prebuilt").ToolNode(
        [
            structured.from_function(func=add),
            structured.from_function(coroutine=add_async, name="add_async"),
            structured.from_function(coroutine=slow, name="slow"),
        ]
    )
    # A ToolNode invoked outside a compiled graph needs a Runtime in its config (langgraph >= 1.2).
    config = {"configurable": {"__pregel_runtime": _module("langgraph.runtime").Runtime()}}

    def state(calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        tool_calls = [
            {"name": name, "args": args, "id": f"call_{j}", "type": "tool_call"}
            for j, (name, args) in enumerate(calls)
        ]
        return {"messages": [ai_message(content="", tool_calls=tool_calls)]}

    sync_states = [state([("add", d)]) for d in ARGS_DICTS]
    async_states = [state([("add_async", d)]) for d in ARGS_DICTS]
    ok = {"n": 1, "status": "success", "content": str(EXPECTED)}
    label = "langgraph.toolnode.ainvoke"
    await p.aio(
        f"{label}.sync_tool",
        lambda i: node.ainvoke(sync_states[i % VARIANTS], config),
        _SLOW_PEER_CALLS,
        extract=_tool_message,
        expect=ok,
    )
    await p.aio(
        f"{label}.async_tool",
        lambda i: node.ainvoke(async_states[i % VARIANTS], config),
        _SLOW_PEER_CALLS,
        extract=_tool_message,
        expect=ok,
    )
    batch_state = state([("slow", {"x": j}) for j in range(BATCH)])

    async def batch() -> list[Any]:
        out = await node.ainvoke(batch_state, config)
        return list(out["messages"])

    await p.abatch(f"batch.{label}.{BATCH}_tool_calls", batch)


# ---------------------------------------------------------------- OpenAI Agents SDK
async def run_openai_agents(p: Pass) -> None:
    """OpenAI Agents SDK: ``FunctionTool.on_invoke_tool`` with the model's JSON argument string."""
    function_tool = _module("agents").function_tool
    tool_context = _module("agents.tool_context").ToolContext
    tools = {fn.__name__: function_tool(fn) for fn in (add, add_async, slow)}

    def invoke(tool: Any, args: str, i: int) -> Any:
        ctx = tool_context(context=None, tool_name=tool.name, tool_call_id=f"call_{i}", tool_arguments=args)
        return tool.on_invoke_tool(ctx, args)

    def caller(tool: Any) -> Callable[[int], Any]:
        return lambda i: invoke(tool, ARGS_JSON[i % VARIANTS], i)

    label = "openai_agents.on_invoke_tool"
    for variant, name in (("sync_tool", "add"), ("async_tool", "add_async")):
        await p.aio(f"{label}.{variant}", caller(tools[name]), 10000, extract=_same, expect=EXPECTED)
    slow_args = [f'{{"x":{i}}}' for i in range(BATCH)]

    async def batch() -> list[Any]:
        return await asyncio.gather(*(invoke(tools["slow"], slow_args[i], i) for i in range(BATCH)))

    await p.abatch(f"batch.{label}.gather", batch)


# ---------------------------------------------------------------- dispatch
PEERS: dict[str, tuple[str, Callable[[Pass], Coroutine[Any, Any, None]]]] = {
    "mcp": ("mcp", run_mcp),
    "pydantic_ai": ("pydantic_ai", run_pydantic_ai),
    "langgraph": ("langgraph", run_langgraph),
    "openai_agents": ("agents", run_openai_agents),
}
"""Row prefix → (the module that must import, the coroutine that measures its rows)."""

MODULES: dict[str, tuple[str, ...]] = {
    "mcp": (
        "mcp",
        "mcp.server.mcpserver",
        "mcp.server.fastmcp",
        "mcp.shared.memory",
        "anyio._backends._asyncio",
        "jsonschema",
    ),
    "pydantic_ai": (
        "pydantic_ai",
        "pydantic_ai.messages",
        "pydantic_ai.models.test",
        "pydantic_ai.tool_manager",
        "pydantic_ai.toolsets",
        "pydantic_ai.usage",
    ),
    "langgraph": (
        "langchain_core.messages",
        "langchain_core.tools",
        "langgraph.prebuilt",
        "langgraph.runtime",
    ),
    "openai_agents": ("agents", "agents.tool_context"),
}
"""Row prefix → every module its rows import, so a process can import them before it forks."""


def run_peer(p: Pass, prefix: str) -> None:
    """Measure one peer's rows; a missing package marks them skipped."""
    module, measure = PEERS[prefix]
    try:
        importlib.import_module(module)
    except ImportError as exc:
        p.skip(prefix, f"{exc}; {_INSTALL}")
        return
    try:
        asyncio.run(measure(p))
    except ImportError as exc:
        p.skip(prefix, f"{exc}; {_INSTALL}")
    except Exception as exc:
        p.fail(prefix, exc)
