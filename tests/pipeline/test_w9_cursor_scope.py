"""With a cursor key set on the engine (``rt.engine.stages.cursor_key``), every tool call runs
inside ``cursor_scope(key, run_id=<its run>, tool=<its name>)``: a cursor minted in one run is
refused in another (``invalid_arguments``), and read back in its own, whichever way the tool is
called (sync or async tool, ``call``/``acall``, a plan node, the second call of a tool in a run)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Plan, Runtime
from actionspace.observation.pagination import CursorKey, decode_cursor, encode_cursor, page
from actionspace.types import Observation

INVOICES = list(range(25))


def _list_sync(cursor: str | None = None) -> object:
    start = decode_cursor(cursor)["offset"] if cursor else 0
    more = start + 10 < len(INVOICES)
    return page(INVOICES[start : start + 10], cursor=encode_cursor({"offset": start + 10}) if more else None)


async def _list_async(cursor: str | None = None) -> object:
    return _list_sync(cursor)


SCHEMA = {"type": "object", "properties": {"cursor": {"type": ["string", "null"]}}}


def _runtime(fn: Any, key: CursorKey | None) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="list", input_schema=SCHEMA, fn=fn, effect="read")
    rt.add_tool(name="other", input_schema=SCHEMA, fn=fn, effect="read")
    rt.engine.stages.cursor_key = key
    return rt


def _call(rt: Runtime, caller: str, run: str, cursor: str | None = None, tool: str = "list") -> Observation:
    raw = {"name": tool, "arguments": {} if cursor is None else {"cursor": cursor}}
    if caller == "sync":
        return rt.call(raw, run_id=run)
    return asyncio.run(rt.acall(raw, run_id=run))


@pytest.mark.parametrize("caller", ["sync", "async"])
@pytest.mark.parametrize("fn", [_list_sync, _list_async], ids=["sync_tool", "async_tool"])
def test_a_cursor_minted_in_one_run_is_refused_in_another(fn: Any, caller: str) -> None:
    with _runtime(fn, CursorKey()) as rt:
        first = _call(rt, caller, "r1")
        first_again = _call(rt, caller, "r1")  # the second call of the tool in its run
        assert first.cursor is not None and first_again.cursor == first.cursor
        elsewhere = _call(rt, caller, "r2", first.cursor)
        assert elsewhere.error is not None and elsewhere.error.category == "invalid_arguments"
        assert "another query, tool or run" in elsewhere.error.message
        other_tool = _call(rt, caller, "r1", first.cursor, tool="other")
        assert other_tool.error is not None and other_tool.error.category == "invalid_arguments"
        for _ in range(2):  # read back in its own run, on whichever path the call takes
            second = _call(rt, caller, "r1", first.cursor)
            assert second.ok and second.data == {"items": list(range(10, 20))}, second.error


def test_a_plan_node_reads_only_its_own_runs_cursors() -> None:
    rt = _runtime(_list_async, CursorKey())

    def plan(cursor: str) -> Plan:
        nodes = [{"id": f"p{i}", "tool": "list", "arguments": {"cursor": cursor}} for i in range(2)]
        return Plan.from_dict({"nodes": nodes})

    async def scenario() -> tuple[Any, Any]:
        first = await rt.acall({"name": "list", "arguments": {}}, run_id="r1")
        assert first.cursor is not None
        await rt.acall({"name": "list", "arguments": {}}, run_id="r2")
        own = await asyncio.wait_for(rt.arun_plan(plan(first.cursor), run_id="r1"), 10)
        foreign = await asyncio.wait_for(rt.arun_plan(plan(first.cursor), run_id="r2"), 10)
        return own, foreign

    with rt:
        own, foreign = asyncio.run(scenario())
    assert all(own.nodes[n].data == {"items": list(range(10, 20))} for n in ("p0", "p1"))
    for n in ("p0", "p1"):
        error = foreign.nodes[n].error
        assert error is not None and error.category == "invalid_arguments", error


def test_without_a_cursor_key_cursors_are_read_across_runs_as_before() -> None:
    with _runtime(_list_sync, None) as rt:
        first = _call(rt, "sync", "r1")
        assert first.cursor is not None
        assert _call(rt, "sync", "r2", first.cursor).ok
