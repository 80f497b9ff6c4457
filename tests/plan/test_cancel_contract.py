"""Honest cancellation: aborted reads are traced as aborted; running writes are asked through their
tool's ``cancel`` hook and reported as they ended; a cancelled waiter names its predecessor."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from actionspace import CancelScope, Plan, Runtime
from actionspace.plan.model import PlanResult


def _run(rt: Runtime, plan: dict[str, Any], started: threading.Event, after_cancel: Any = None) -> PlanResult:
    scope = CancelScope()

    def canceller() -> None:
        assert started.wait(5)
        scope.cancel(reason="user pressed stop")
        if after_cancel is not None:
            after_cancel()

    thread = threading.Thread(target=canceller)
    thread.start()
    try:
        return rt.run_plan(Plan.from_dict(plan), cancel=scope)
    finally:
        thread.join(5)


def _read_runtime(*, inline: bool) -> tuple[Runtime, threading.Event, threading.Event]:
    rt = Runtime("memory://", recover_on_start=False)
    started, release = threading.Event(), threading.Event()

    @rt.tool(effect="read", blocking=not inline)
    def slow(name: str) -> str:
        started.set()
        release.wait(5)
        return f"read {name}"

    @rt.tool(effect="none")
    def after(x: str) -> str:
        return x

    return rt, started, release


PLAN = {
    "nodes": [
        {"id": "r", "tool": "slow", "arguments": {"name": "a"}},
        {"id": "n", "tool": "after", "arguments": {"x": {"$ref": "r.data"}}},
    ]
}


def _observation_events(rt: Runtime, result: PlanResult, node: str) -> list[Mapping[str, Any]]:
    call_id = f"{result.run_id}:{node}"
    return [
        e.data for e in rt.trace.events(result.run_id) if e.kind == "observation" and e.call_id == call_id
    ]


def test_a_cancelled_waiter_names_the_predecessor_it_waited_on_not_itself() -> None:
    rt, started, release = _read_runtime(inline=False)
    result = _run(rt, PLAN, started, release.set)
    blocked = result.nodes["n"].error
    assert blocked is not None and blocked.category == "cancelled"
    assert blocked.details["blocked_by"] == "r"
    events = [e.data for e in rt.trace.events(result.run_id) if e.kind == "plan_node_blocked"]
    assert events == [{"node": "n", "blocked_by": "r"}]


def test_an_aborted_read_on_a_thread_is_traced_as_aborted_and_never_as_finished() -> None:
    rt, started, release = _read_runtime(inline=False)
    result = _run(rt, PLAN, started)
    release.set()
    r = result.nodes["r"]
    assert r.error is not None and (r.error.category, r.error.details["phase"]) == ("cancelled", "running")
    observed = _observation_events(rt, result, "r")
    assert [e["status"] for e in observed] == ["error"]
    assert observed[0]["aborted"] is True


def test_a_read_running_inline_when_the_abort_arrives_is_reported_aborted_not_ok() -> None:
    rt, started, release = _read_runtime(inline=True)
    result = _run(rt, PLAN, started, release.set)
    r = result.nodes["r"]
    assert r.status == "error" and r.error is not None and r.error.category == "cancelled"
    assert _observation_events(rt, result, "r")[-1] == {
        "status": "error",
        "tool": "slow",
        "version": "1",
        "category": "cancelled",
        "aborted": True,
    }
    assert result.nodes["n"].error is not None  # nothing ran on the discarded result


class Transfer:
    """A payment rail whose in-flight transfers can be stopped until they settle (fault injection)."""

    def __init__(self, *, settles: bool, hook_answer: str | None = None) -> None:
        self.started, self.stop, self.proceed = threading.Event(), threading.Event(), threading.Event()
        self.settles, self.hook_answer = settles, hook_answer
        self.asked: list[tuple[dict[str, Any], str | None]] = []
        self.settled: list[int] = []

    def send(self, amount: int) -> dict[str, Any]:
        self.started.set()
        self.proceed.wait(5)
        if self.stop.is_set() and not self.settles:
            raise RuntimeError("transfer withdrawn")
        self.settled.append(amount)
        return {"id": "t1"}

    def cancel(self, arguments: dict[str, Any], key: str | None) -> str | None:
        self.asked.append((arguments, key))
        self.stop.set()
        self.proceed.set()
        return self.hook_answer


def _write_runtime(rail: Transfer, *, hook: bool = True) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(
        name="transfer",
        input_schema={
            "type": "object",
            "properties": {"amount": {"type": "integer"}},
            "required": ["amount"],
        },
        fn=rail.send,
        effect="external",
        writes=["account:main"],
        cancel=rail.cancel if hook else None,
    )
    return rt


WRITE = {"nodes": [{"id": "pay", "tool": "transfer", "arguments": {"amount": 5}}]}


def test_a_running_write_is_asked_to_abort_and_reported_cancelled_when_it_stopped() -> None:
    rail = Transfer(settles=False, hook_answer="cancelled")
    rt = _write_runtime(rail)
    result = _run(rt, WRITE, rail.started)
    pay = result.nodes["pay"]
    assert rail.asked and rail.asked[0][0] == {"amount": 5}
    assert rail.asked[0][1] is not None and rail.asked[0][1].startswith("as1_")  # the call's key
    assert pay.error is not None and pay.error.category == "cancelled"
    assert pay.error.details["hook"] == "cancelled" and pay.error.details["committed"] is False
    assert rail.settled == []
    answered = [e.data for e in rt.trace.events(result.run_id) if e.kind == "plan_node_abort_answered"]
    assert answered == [{"node": "pay", "answer": "cancelled"}]


def test_a_write_that_committed_anyway_is_reported_committed_never_undone() -> None:
    rail = Transfer(settles=True, hook_answer="committed")
    result = _run(_write_runtime(rail), WRITE, rail.started)
    pay = result.nodes["pay"]
    assert pay.status == "ok" and rail.settled == [5]
    assert pay.diagnostics["cancel"] == {"phase": "committed", "hook": "committed", "undone": False}


def test_a_write_whose_abort_is_unanswered_and_whose_outcome_is_lost_is_unknown_commit() -> None:
    rail = Transfer(settles=False, hook_answer=None)
    rail.send = _lost(rail.send)  # type: ignore[method-assign]
    result = _run(_write_runtime(rail), WRITE, rail.started)
    pay = result.nodes["pay"]
    assert pay.error is not None and pay.error.category == "unknown_commit"
    assert pay.error.details["hook"] == "unknown"


def test_a_write_without_a_hook_is_let_finish() -> None:
    rail = Transfer(settles=True)
    result = _run(_write_runtime(rail, hook=False), WRITE, rail.started, rail.proceed.set)
    assert result.nodes["pay"].status == "ok" and rail.asked == []


def _lost(send: Any) -> Any:
    def lost(amount: int) -> Any:
        with contextlib.suppress(RuntimeError):
            send(amount)
        raise TimeoutError("the rail stopped answering")

    return lost


def test_the_async_path_reports_the_same() -> None:
    rail = Transfer(settles=False, hook_answer="cancelled")
    rt = _write_runtime(rail)

    async def scenario() -> PlanResult:
        scope = CancelScope()
        task = asyncio.ensure_future(rt.arun_plan(Plan.from_dict(WRITE), cancel=scope))
        while not rail.started.is_set():
            await asyncio.sleep(0.005)
        scope.cancel()
        return await task

    result = asyncio.run(scenario())
    assert result.nodes["pay"].error is not None and result.nodes["pay"].error.category == "cancelled"
