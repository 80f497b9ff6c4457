"""Once ``Runtime.close()`` has begun, no tool call begins on any store: a later call of a message
run one after the other, and a plan node that had not begun, end ``cancelled`` with
``details["sent"] == False``, their tool never called and no ledger intent recorded."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from actionspace import Observation, Runtime
from actionspace.plan import PlanResult

WAIT_S = 10.0
T = TypeVar("T")


class Gate:
    """Tools that count their calls; the first waits until released."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.first_started = threading.Event()
        self.release = threading.Event()

    def hold(self, name: str, x: int) -> int:
        self.calls.append(name)
        if len(self.calls) == 1:
            self.first_started.set()
            assert self.release.wait(WAIT_S)
        return x

    async def ahold(self, name: str, x: int) -> int:
        self.calls.append(name)
        if len(self.calls) == 1:
            self.first_started.set()
            await asyncio.to_thread(self.release.wait, WAIT_S)
        return x


def _runtime(url: str, gate: Gate) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"], blocking=False)
    def get(x: int) -> int:
        """Read x (runs on the calling thread)."""
        return gate.hold("get", x)

    @rt.tool(effect="write", writes=["w:{x}"], blocking=False)
    def put(x: int) -> int:
        """Write x (runs on the calling thread)."""
        return gate.hold("put", x)

    @rt.tool(effect="read", reads=["ar:{x}"])
    async def aget(x: int) -> int:
        """Read x."""
        return await gate.ahold("aget", x)

    @rt.tool(effect="write", writes=["aw:{x}"])
    async def aput(x: int) -> int:
        """Write x."""
        return await gate.ahold("aput", x)

    return rt


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'w50.db'}"


def _close_while_first_runs(rt: Runtime, gate: Gate, work: Callable[[], T]) -> T:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert gate.first_started.wait(WAIT_S)
    rt.close()
    gate.release.set()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    [value] = out
    assert not isinstance(value, BaseException), repr(value)
    return value  # type: ignore[no-any-return]


def _keys_in_ledger(rt: Runtime, url: str) -> list[str]:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return [node for (node,) in db.execute("select node_id from ledger_entries")]
    return [entry.node_id for entry in rt.ledger.list(limit=100)]


def _assert_not_sent(obs: Observation) -> None:
    assert obs.error is not None, obs
    assert obs.error.category == "cancelled", obs.error
    assert obs.error.details.get("sent") is False, obs.error
    assert not obs.error.retryable


@pytest.mark.parametrize("second", ["get", "put"])
def test_a_later_call_of_a_message_run_one_after_the_other_is_not_sent_once_closed(
    url: str, second: str
) -> None:
    gate = Gate()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    raw = [{"name": "get", "arguments": {"x": 1}}, {"name": second, "arguments": {"x": 2}}]
    out = _close_while_first_runs(rt, gate, lambda: rt.call_all(raw, run_id=run_id))
    assert gate.calls == ["get"]  # the second tool never ran
    assert [o.tool for o in out] == ["get", second]
    _assert_not_sent(out[1])
    assert _keys_in_ledger(rt, url) == []  # no intent recorded for a call never sent


@pytest.mark.parametrize("use_async", [False, True], ids=["run_plan", "arun_plan"])
@pytest.mark.parametrize(
    "tools", [("get", "get"), ("get", "put"), ("aget", "aget"), ("aget", "aput")], ids=lambda t: "-".join(t)
)
def test_a_plan_node_not_begun_when_the_runtime_closes_is_never_sent(
    url: str, use_async: bool, tools: tuple[str, str]
) -> None:
    gate = Gate()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    first, then = tools
    plan = {
        "nodes": [
            {"id": "a", "tool": first, "arguments": {"x": 1}},
            {"id": "b", "tool": then, "arguments": {"x": 2}, "depends_on": ["a"]},
        ]
    }

    def work() -> PlanResult:
        if use_async:
            return asyncio.run(rt.arun_plan(plan, run_id=run_id))
        return rt.run_plan(plan, run_id=run_id)

    result = _close_while_first_runs(rt, gate, work)
    assert gate.calls == [first]  # node b's tool never ran
    assert result.nodes["a"].error is not None and result.nodes["a"].error.category == "cancelled"
    _assert_not_sent(result.nodes["b"])
    assert result.status == "error"
    assert _keys_in_ledger(rt, url) == []


def test_the_nodes_of_a_wave_not_begun_when_the_runtime_closes_are_never_sent(url: str) -> None:
    """Sync tools of one wave are stepped one after the other on the plan's thread: those after
    the one running when the runtime closed never begin."""
    gate = Gate()
    rt = _runtime(url, gate)
    run_id = rt.new_run()
    plan = {"nodes": [{"id": f"n{i}", "tool": "get", "arguments": {"x": i}} for i in range(4)]}
    result = _close_while_first_runs(rt, gate, lambda: rt.run_plan(plan, run_id=run_id))
    assert gate.calls == ["get"]
    not_sent = [
        k
        for k, obs in result.nodes.items()
        if obs.error is not None and obs.error.details.get("sent") is False
    ]
    assert len(not_sent) == 3, result.nodes
    for k in not_sent:
        _assert_not_sent(result.nodes[k])


def test_a_write_blocked_by_a_failed_node_of_a_plan_cut_by_close_stays_cancelled_not_unknown(
    url: str,
) -> None:
    """A node blocked by its failed predecessor never ran: a close while the plan ran must not
    turn it into an ``unknown_commit`` (it cannot have committed)."""
    gate = Gate()
    rt = _runtime(url, gate)

    @rt.tool(effect="read", blocking=False)
    def broken(x: int) -> int:
        """Read x, then fail."""
        gate.hold("broken", x)
        raise LookupError("no such x")

    run_id = rt.new_run()
    plan = {
        "nodes": [
            {"id": "a", "tool": "broken", "arguments": {"x": 1}},
            {"id": "b", "tool": "put", "arguments": {"x": 2}, "depends_on": ["a"]},
        ]
    }
    result = _close_while_first_runs(rt, gate, lambda: rt.run_plan(plan, run_id=run_id))
    assert gate.calls == ["broken"]
    blocked = result.nodes["b"].error
    assert blocked is not None and blocked.category == "cancelled", blocked
    assert blocked.details.get("blocked_by") == "a"
    assert _keys_in_ledger(rt, url) == []
