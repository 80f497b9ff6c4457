"""Generated plans of tools that answer at once, wait, or run on a thread, with and without
references between nodes and with or without a cancel scope: whatever the driver does with
them, each tool sees what it would under ``asyncio.gather`` — one task from its first step to
its end, no task stepping two waiting calls at once, and the caller's context as its parent."""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import CancelScope, Plan, Runtime

_current: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="caller")

_TOOLS = ("instant", "waits", "threaded")


class _Seen:
    """What each call saw: its node, task at start and end, the parent in its context, and
    when it waited."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[int, int, str, float, float]] = {}

    def note(self, x: int, first: object, last: object, parent: str, began: float, ended: float) -> None:
        self.calls[x] = (id(first), id(last), parent, began, ended)


def _runtime(seen: _Seen) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def instant(x: int, after: int = 0) -> int:
        task = asyncio.current_task()
        seen.note(x, task, task, _current.get(), 0.0, 0.0)
        return x

    @rt.tool(effect="none")
    async def waits(x: int, after: int = 0) -> int:
        first, parent = asyncio.current_task(), _current.get()
        token = _current.set(f"node {x}")
        began = time.monotonic()
        try:
            await asyncio.sleep(0.001 * (x % 3))
        finally:
            _current.reset(token)
        seen.note(x, first, asyncio.current_task(), parent, began, time.monotonic())
        return x

    @rt.tool(effect="none")
    def threaded(x: int, after: int = 0) -> int:
        seen.note(x, None, None, _current.get(), 0.0, 0.0)
        return x

    return rt


_nodes = st.lists(
    st.tuples(st.sampled_from(_TOOLS), st.booleans()),  # the tool; whether it refers to the node before
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=_nodes, scoped=st.booleans(), plans=st.integers(1, 2))
def test_every_call_runs_in_one_task_with_the_callers_context(
    nodes: list[tuple[str, bool]], scoped: bool, plans: int
) -> None:
    seen = _Seen()
    rt = _runtime(seen)
    listed: list[dict[str, Any]] = []
    for i, (tool, refers) in enumerate(nodes):
        arguments: dict[str, Any] = {"x": i}
        if refers and i > 0:
            arguments["after"] = {"$ref": f"n{i - 1}.data"}
        listed.append({"id": f"n{i}", "tool": tool, "arguments": arguments})
    plan = Plan.from_dict({"nodes": listed})

    async def scenario() -> None:
        run = rt.new_run()
        for _ in range(plans):  # a second plan of the run: its tools are no longer new to it
            seen.calls.clear()
            result = await asyncio.wait_for(
                rt.arun_plan(plan, run_id=run, cancel=CancelScope() if scoped else None), 10
            )
            assert result.status == "ok", result.failed
            assert sorted(seen.calls) == list(range(len(nodes)))
            for x, (first, last, parent, _, _) in seen.calls.items():
                assert parent == "caller", (x, parent)
                assert first == last, x
            calls = seen.calls.values()
            waited = sorted((began, ended, first) for first, _, _, began, ended in calls if ended)
            for i, (_, ended, task) in enumerate(waited):
                for other_began, _, other_task in waited[i + 1 :]:
                    if other_began >= ended:
                        break
                    assert other_task != task, "one task stepped two waiting calls at once"

    with rt:
        asyncio.run(scenario())
