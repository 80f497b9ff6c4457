"""A tool that changes while a call of it runs: the server announces the change
(``notifications/tools/list_changed``) after the call was sent and before its answer. Which definition
the server ran is then unknown: a read's answer is not used (``version_mismatch``: read the new
definition, call again), a write's is ``unknown_commit`` (it ran, under one definition or the other),
and nothing is sent again. A change of another tool leaves the call's answer as it is.

The server is a real SDK server (the low-level ``Server``), in memory, whose tools declare an output
schema; a call waits for the test's word, which comes once the client listed the change.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import MessageHandlerFnT
from mcp.server.lowlevel import Server

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_connection import Connection
from actionspace.adapters.mcp_client import McpToolset, StdioServer

_INPUT: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
_NUMBER: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
_TEXT: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}
_READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITE = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
_ANNOTATIONS = {"count": _READ, "count_write": _WRITE, "other": _READ}

CHANGES: dict[str, Callable[[types.Tool], types.Tool]] = {
    "output_schema": lambda tool: tool.model_copy(update={"output_schema": _TEXT}),
    "description": lambda tool: tool.model_copy(update={"description": "Count something else."}),
}


class Changing:
    """A low-level MCP server, in memory: its tools answer ``{"n": 1}`` once the test releases them."""

    def __init__(self) -> None:
        self.tools = {
            name: types.Tool(
                name=name, description="Count.", input_schema=_INPUT, output_schema=_NUMBER, annotations=notes
            )
            for name, notes in _ANNOTATIONS.items()
        }
        self.calls: list[str] = []
        self.release = threading.Event()
        self.session: Any = None
        self.server: Server[Any] = Server("changing", on_list_tools=self._list, on_call_tool=self._call)

    async def _list(self, ctx: Any, params: Any) -> types.ListToolsResult:
        self.session = ctx.session
        return types.ListToolsResult(tools=list(self.tools.values()))

    async def _call(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        self.calls.append(params.name)
        while not self.release.is_set():
            await anyio.sleep(0.01)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text='{"n": 1}')], structured_content={"n": 1}
        )

    def toolset(self, rt: Runtime) -> McpToolset:
        toolset = McpToolset(StdioServer(sys.executable, name="changing", mode="legacy", allowlisted=True))

        async def open_client(stack: AsyncExitStack, handler: MessageHandlerFnT) -> Client:
            client = Client(self.server, mode="legacy", message_handler=handler, cache=None)
            return await stack.enter_async_context(client)

        toolset.connection = Connection("changing", open_client, toolset._on_listing)
        toolset.register(rt)
        return toolset


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def _until(check: Callable[[], bool], deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, "not reached before the deadline"
        time.sleep(0.01)


def _call_while_changing(
    rt: Runtime, server: Changing, toolset: McpToolset, name: str, how: str | None
) -> Observation:
    """Call ``name``; once the server has it, change ``name`` (``how``) or, for None, another tool, and
    announce it; release the call once the client listed the change."""
    answer: list[Observation] = []
    caller = threading.Thread(
        target=lambda: answer.append(rt.call({"name": name, "arguments": {"text": "x"}}))
    )
    caller.start()
    _until(lambda: len(server.calls) == 1)
    changed, change = (name, CHANGES[how]) if how is not None else ("other", CHANGES["description"])
    server.tools[changed] = change(server.tools[changed])
    before = toolset.connection.refreshes
    toolset.connection.submit(server.session.send_tool_list_changed()).result(timeout=30)
    _until(lambda: toolset.connection.refreshes > before)
    server.release.set()
    caller.join(timeout=60)
    assert answer, "the call did not end"
    return answer[0]


@pytest.mark.parametrize("how", sorted(CHANGES))
@pytest.mark.parametrize(
    ("name", "category"), [("count", "version_mismatch"), ("count_write", "unknown_commit")]
)
def test_a_tool_changed_during_its_call_ends_the_call_in_doubt_and_nothing_is_sent_again(
    rt: Runtime, name: str, category: str, how: str
) -> None:
    server = Changing()
    toolset = server.toolset(rt)
    obs = _call_while_changing(rt, server, toolset, name, how)
    assert obs.status == "error" and obs.error is not None, obs.data
    assert obs.error.category == category, obs.error
    if category == "version_mismatch":  # a write's doubt is the ledger's: its own words, and no retry
        assert obs.error.vendor_code == "tool_changed_during_call", obs.error
    assert server.calls == [name]  # never sent again


@pytest.mark.parametrize("name", ["count", "count_write"])
def test_a_change_of_another_tool_during_a_call_leaves_its_answer_as_it_is(rt: Runtime, name: str) -> None:
    server = Changing()
    toolset = server.toolset(rt)
    obs = _call_while_changing(rt, server, toolset, name, None)
    assert obs.status == "ok" and obs.data == {"n": 1}, obs.error
    assert server.calls == [name]
