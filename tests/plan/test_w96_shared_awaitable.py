"""Plan nodes whose tool awaits one future or task that every node shares (a fetch begun once
and awaited by each call, as under ``asyncio.gather``): each node ends with its own value.

A node's call is begun before its task first runs (or in that first run), and its task hands
the tool's pending future to the loop later; meanwhile the wave's other nodes begin, and their
tools await the same future. asyncio refuses to await a future that a coroutine yielded and no
task took yet ("await wasn't used with future"), and a task refuses one whose flag a task took
back: every node must still wait on it and end with its value.

Every test runs twice: with a node's call begun at once as its task, and as where asyncio offers
no way to do that (the call begins when its task first runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.plan import PlanNode, driver
from actionspace.plan.model import PlanResult
from actionspace.types import Observation
from actionspace.validation.verdicts import Accepted


@pytest.fixture(autouse=True, params=["begun at once", "begun on the task's first run"])
def _begin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if request.param != "begun at once":
        monkeypatch.setattr(driver, "_swap", None)
    yield


class _Gate:
    """One shared awaitable per plan run: a future, or a task waiting on an event."""

    def __init__(self, kind: str, n: int) -> None:
        loop = asyncio.get_running_loop()
        self.n = n
        self.waiting: list[int] = []
        self.all_waiting = asyncio.Event()
        self.awaited: asyncio.Future[Any]
        self.open: Callable[[], None]
        if kind == "future":
            future: asyncio.Future[None] = loop.create_future()
            self.awaited, self.open = future, lambda: future.set_result(None)
        else:
            released = asyncio.Event()
            self.awaited, self.open = loop.create_task(released.wait()), released.set


def _runs(kind: str, nodes: Callable[[int], list[PlanNode]], n: int) -> list[PlanResult]:
    """Two runs of the plan ``nodes(n)`` (the second: the tool is known to wait, so each node gets
    its task at once), each opened once every node's tool waits on the run's gate."""
    rt = Runtime("memory://", recover_on_start=False)
    gates: list[_Gate] = []

    @rt.tool(effect="none")
    async def gated(x: int) -> int:
        gate = gates[-1]
        gate.waiting.append(x)
        if len(gate.waiting) == gate.n:
            gate.all_waiting.set()
        await gate.awaited
        return x

    async def main() -> list[PlanResult]:
        results = []
        for _ in range(2):
            gate = _Gate(kind, n)
            gates.append(gate)
            plan = Plan(nodes=nodes(n), max_concurrency=n)
            run = asyncio.ensure_future(rt.arun_plan(plan, run_id=rt.new_run()))
            await asyncio.wait_for(gate.all_waiting.wait(), 10)
            gate.open()
            results.append(await asyncio.wait_for(run, 10))
        return results

    try:
        return asyncio.run(main())
    finally:
        rt.close()


def _plain(n: int) -> list[PlanNode]:
    return [PlanNode(id=f"n{i}", tool="gated", arguments={"x": i}) for i in range(n)]


def _first_verified(n: int) -> list[PlanNode]:
    """The first node has a verifier (not plain: the driver steps it the general way)."""
    nodes = _plain(n)
    nodes[0] = PlanNode(id="n0", tool="gated", arguments={"x": 0}, verify=lambda _obs: Accepted())
    return nodes


@pytest.mark.parametrize("n", [2, 3, 17])
@pytest.mark.parametrize("kind", ["future", "task"])
@pytest.mark.parametrize("nodes", [_plain, _first_verified], ids=["plain", "first verified"])
def test_nodes_awaiting_one_shared_awaitable_each_end_with_their_value(
    n: int, kind: str, nodes: Callable[[int], list[PlanNode]]
) -> None:
    for result in _runs(kind, nodes, n):
        failures = {k: o.error.message for k, o in result.nodes.items() if o.error is not None}
        assert failures == {}
        assert result.status == "ok"
        assert {k: o.data for k, o in result.nodes.items()} == {f"n{i}": i for i in range(n)}


_WAITS = ("shared", "own", "done", "none")
"""What a node's tool awaits: the plan's shared gate, a future of its own, a future already
done, or nothing (it answers at once)."""


@st.composite
def _gated_plans(draw: st.DrawFn) -> list[tuple[str, bool, tuple[int, ...]]]:
    """Per node: what its tool awaits, whether it fails, and its predecessors (earlier nodes)."""
    n = draw(st.integers(1, 14))
    return [
        (
            draw(st.sampled_from(_WAITS)),
            draw(st.booleans()) if draw(st.integers(0, 4)) == 0 else False,
            tuple(sorted(draw(st.sets(st.integers(0, j - 1), max_size=2)))) if j else (),
        )
        for j in range(n)
    ]


def _expected(shape: list[tuple[str, bool, tuple[int, ...]]]) -> dict[str, object]:
    """Each node's data when it and every ancestor succeed, else how it ends."""
    out: dict[str, object] = {}
    for j, (_wait, fails, preds) in enumerate(shape):
        if any(out[f"n{p}"] in ("refused", "blocked") for p in preds):
            out[f"n{j}"] = "blocked"  # by a failed ancestor: it never runs
        else:
            out[f"n{j}"] = "refused" if fails else j
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=_gated_plans(), opened_after=st.integers(0, 3))
def test_generated_plans_awaiting_shared_and_own_futures_end_as_their_shape_says(
    shape: list[tuple[str, bool, tuple[int, ...]]], opened_after: int
) -> None:
    """Generated plans (sizes, failures, dependencies) whose nodes await the plan's one shared
    gate, a future of their own, a done future or nothing: every node that runs ends with its
    own value or its tool's failure, and a failed node's descendants are blocked, whichever
    node awaited the shared gate first and however late it opened."""
    rt = Runtime("memory://", recover_on_start=False)
    gate: dict[str, asyncio.Future[None]] = {}

    class Refused(Exception):
        pass

    @rt.tool(effect="none")
    async def step(x: int, wait: str, fail: bool) -> int:
        loop = asyncio.get_running_loop()
        if wait == "shared":
            await gate["shared"]
        elif wait in ("own", "done"):
            own: asyncio.Future[None] = loop.create_future()
            if wait == "done":
                own.set_result(None)
            else:
                loop.call_soon(own.set_result, None)
            await own
        if fail:
            raise Refused(f"node {x} refused")
        return x

    nodes = [
        PlanNode(
            id=f"n{j}",
            tool="step",
            arguments={"x": j, "wait": wait, "fail": fails},
            depends_on=tuple(f"n{p}" for p in preds),
        )
        for j, (wait, fails, preds) in enumerate(shape)
    ]

    async def main() -> PlanResult:
        loop = asyncio.get_running_loop()
        gate["shared"] = loop.create_future()

        async def opener() -> None:
            for _ in range(opened_after):  # the loop turns a few times: some nodes began, not all
                await asyncio.sleep(0)
            gate["shared"].set_result(None)

        opening = asyncio.ensure_future(opener())
        result = await asyncio.wait_for(
            rt.arun_plan(Plan(nodes=nodes, max_concurrency=len(nodes)), run_id=rt.new_run()), 10
        )
        await opening
        return result

    try:
        result = asyncio.run(main())
    finally:
        rt.close()
    assert {k: _ended(o) for k, o in result.nodes.items()} == _expected(shape)


def _ended(obs: Observation) -> object:
    """An observation as :func:`_expected` names it (any other error: its message)."""
    if obs.error is None:
        return obs.data
    if obs.error.category == "cancelled" and "blocked_by" in obs.error.details:
        return "blocked"
    return "refused" if "refused" in obs.error.message else obs.error.message
