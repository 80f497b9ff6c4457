"""actionspace's rows: the whole in-memory pipeline, from the model's call string to the Observation.

Each row gets a fresh ``Runtime(store="memory://")`` with the tools registered as ``effect="none"``,
so every call goes parse → resolve → validate → authorize → execute → observe → trace, in memory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from actionspace.bench._timing import Pass
from actionspace.bench._workload import (
    ARGS_DICTS,
    BATCH,
    EXPECTED,
    VARIANTS,
    add,
    add_async,
    openai_call,
    openai_calls,
    slow,
)

if TYPE_CHECKING:
    from actionspace.runtime import Runtime
    from actionspace.session import Session, Turn
    from actionspace.types import Observation

__all__ = ["OK", "observed", "run_ours"]

OK = {"status": "ok", "data": EXPECTED}
"""What every per-call row of ours must return for call 0, as :func:`observed` reports it."""


def observed(obs: Any) -> dict[str, Any]:
    """The part of an Observation the check compares: its status and data."""
    return {"status": obs.status, "data": obs.data}


def _runtime() -> Runtime:
    from actionspace.runtime import Runtime

    rt = Runtime(store="memory://")
    rt.tool(effect="none")(add)
    rt.tool(effect="none")(add_async)
    rt.tool(effect="none")(slow)
    return rt


def _sync_rows(p: Pass) -> None:
    calls = openai_calls("add")
    if p.want("actionspace.call.sync_tool"):
        with _runtime() as rt:
            p.sync(
                "actionspace.call.sync_tool",
                lambda i: rt.call(calls[i % VARIANTS]),
                20000,
                extract=observed,
                expect=OK,
            )


async def _batch_row(p: Pass) -> None:
    name = "batch.actionspace.acall.gather"
    if not p.want(name):
        return
    slow_calls = [openai_call("slow", {"x": i}, f"call_{i}") for i in range(BATCH)]
    with _runtime() as rt:

        async def batch() -> list[Any]:
            return await asyncio.gather(*(rt.acall(c) for c in slow_calls))

        first = await batch()
        wrong = [i for i, o in enumerate(first) if observed(o) != {"status": "ok", "data": i}]
        if wrong:
            p.fail(
                name, AssertionError(f"batch items {wrong[:5]} did not return their x: {first[wrong[0]]!r}")
            )
            return
        await p.abatch(name, batch)


async def _message_row(p: Pass, *, sync: bool = False) -> None:
    """The same 100 calls as one model message (an assistant message with 100 ``tool_calls``),
    handed whole to ``rt.acall_all``: what an agent loop does with a model's parallel calls, and
    what LangGraph's ToolNode row does with its 100 tool calls. ``sync``: handed to the sync
    ``rt.call_all`` instead (from sync code the async tool runs on the executor's portal loop;
    the bench's own loop waits, doing nothing else)."""
    name = "batch.actionspace.call_all.message" if sync else "batch.actionspace.acall_all.message"
    if not p.want(name):
        return
    entries = [json.loads(openai_call("slow", {"x": i}, f"call_{i}")) for i in range(BATCH)]
    message = json.dumps({"role": "assistant", "content": None, "tool_calls": entries})
    with _runtime() as rt:
        run = rt.new_run()

        async def batch() -> list[Any]:
            if sync:
                return rt.call_all(message, run_id=run)
            return await rt.acall_all(message, run_id=run)

        first = await batch()
        wrong = [i for i, o in enumerate(first) if observed(o) != {"status": "ok", "data": i}]
        if wrong or len(first) != BATCH:
            why = f"{len(first)} observations; calls {wrong[:5]} did not return their x"
            p.fail(name, AssertionError(why))
            return
        await p.abatch(name, batch)


def _turns(provider: str) -> list[Any]:
    """The bench's calls of the async tool as one-call assistant turns in ``provider``'s form."""
    entries = [json.loads(call) for call in openai_calls("add_async")]
    if provider == "openai_chat":
        return [{"role": "assistant", "content": None, "tool_calls": [e]} for e in entries]
    if provider == "anthropic":
        return [
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": e["id"],
                        "name": e["function"]["name"],
                        "input": json.loads(e["function"]["arguments"]),
                    }
                ],
            }
            for e in entries
        ]
    return [
        [{"type": "function_call", "call_id": e["id"], **e["function"]}] for e in entries
    ]  # openai_responses: the output items


SESSION_ROWS: dict[str, str] = {
    "openai_chat": "actionspace.session.ahandle.async_tool",
    "anthropic": "actionspace.session.ahandle.async_tool.anthropic",
    "openai_responses": "actionspace.session.ahandle.async_tool.responses",
}
"""Provider form of the model's turn → its row."""


async def _session_row(p: Pass) -> None:
    """One agent-loop turn: a session's ``ahandle`` of the model's message holding one call of the
    async tool, as the provider's SDK returns it (a Chat Completions message dict, an Anthropic
    message dict, a list of Responses output items); what a row measures ends with the provider's
    tool message rendered for the next request."""
    for provider, name in SESSION_ROWS.items():
        if not p.want(name):
            continue
        turns = _turns(provider)
        with _runtime() as rt:
            s = rt.session(provider=provider)  # type: ignore[arg-type]
            s.user("add two numbers")

            def extract(turn: Any) -> dict[str, Any]:
                (obs,) = turn.observations
                return observed(obs)

            await p.aio(name, _turner(s, turns), 20000, extract=extract, expect=OK)


def _turner(s: Session, turns: list[Any]) -> Callable[[int], Awaitable[Turn]]:
    return lambda i: s.ahandle(turns[i % VARIANTS])


def _acaller(rt: Runtime, inputs: list[Any]) -> Callable[[int], Awaitable[Observation]]:
    return lambda i: rt.acall(inputs[i % VARIANTS])


async def _async_rows(p: Pass) -> None:
    from actionspace.types import ToolCall

    sync_calls = openai_calls("add")
    async_calls = openai_calls("add_async")
    prebuilt = [
        ToolCall(name="add_async", arguments=ARGS_DICTS[i], id=f"call_{i + 1}") for i in range(VARIANTS)
    ]
    rows: list[tuple[str, list[Any]]] = [
        ("actionspace.acall.async_tool", async_calls),
        ("actionspace.acall.sync_tool", sync_calls),
        ("actionspace.acall.toolcall", prebuilt),
    ]
    for name, inputs in rows:
        if not p.want(name):
            continue
        with _runtime() as rt:
            await p.aio(name, _acaller(rt, inputs), 20000, extract=observed, expect=OK)
    await _session_row(p)
    await _batch_row(p)
    await _message_row(p)
    await _message_row(p, sync=True)


def run_ours(p: Pass) -> None:
    """Every actionspace row: sync ``rt.call``, async ``rt.acall`` (string and prebuilt ToolCall), batch."""
    if not p.wants_any("actionspace."):
        return
    try:
        _runtime().close()
    except ImportError as exc:
        p.skip("actionspace", f"the runtime does not import: {exc}")
        return
    from actionspace.bench._durable import run_durable_ours

    _sync_rows(p)
    asyncio.run(_async_rows(p))
    run_durable_ours(p)
