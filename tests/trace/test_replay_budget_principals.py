"""Replay charges each call to the principal the run recorded for it.

Budgets are kept per run and principal (id and tenant): in a run shared by several principals each
spends an allowance of its own. A replay that charged every call to one principal (the fresh
runtime's) refused calls the live run admitted; it must decide every budget admission as the live
run did, whoever the fresh runtime acts for, on every trace store, and for traces written before
the ``authorized`` event named a tenant."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.plan import Plan
from actionspace.policy.budget import Budget
from actionspace.trace.events import TraceEvent
from actionspace.trace.replay import Replayed, replay_events

ALICE = Principal(id="alice", tenant="t1", scopes=["*"])
BOB = Principal(id="bob", tenant="t1", scopes=["*"])
ALICE_ELSEWHERE = Principal(id="alice", tenant="t2", scopes=["*"])  # alice's id in another tenant
CAROL = Principal(id="carol", scopes=["*"])
RUN = "shared-run"


def _runtime(store: str, budgets: Sequence[Budget], principal: Principal = ALICE) -> Runtime:
    rt = Runtime(store, recover_on_start=False, principal=principal, budgets=list(budgets))

    @rt.tool(effect="read")
    def look(x: int) -> int:
        """Give ``x`` back."""
        return x

    @rt.tool(effect="read", items_from="xs")
    def look_many(xs: list[int]) -> list[int]:
        """Give every ``x`` back (one call, one item per ``x``)."""
        return xs

    return rt


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'live.db'}"


def _live(
    store: str, budgets: Sequence[Budget], calls: Sequence[tuple[Principal, int]]
) -> tuple[list[str], list[TraceEvent]]:
    """Run ``calls`` (who, how many items: 0 is a single ``look``) in one run; the budget verdicts
    the live run gave, in order, and its events."""
    rt = _runtime(store, budgets)
    try:
        run = rt.new_run(RUN, principal=ALICE)
        for i, (who, items) in enumerate(calls):
            raw = (
                {"name": "look", "arguments": {"x": i}, "id": f"c{i}"}
                if items == 0
                else {"name": "look_many", "arguments": {"xs": list(range(items))}, "id": f"c{i}"}
            )
            rt.call(raw, run_id=run, principal=who)
        events = list(rt.trace.events(run))
    finally:
        rt.close()
    verdicts = [_verdict(e) for e in events if e.kind == "budget"]
    return verdicts, events


def _verdict(event: TraceEvent) -> str:
    return f"denied:{event.data['unit']}" if event.data["verdict"] == "denied" else str(event.data["verdict"])


def _replayed(events: list[TraceEvent], budgets: Sequence[Budget], fresh: Principal) -> Replayed:
    rt = _runtime("memory://", budgets, fresh)
    try:
        return replay_events(RUN, events, rt)
    finally:
        rt.close()


def _budget_verdicts(result: Replayed) -> list[str]:
    return [d.replayed for d in result.decisions if d.stage == "budget"]


TWO_PER_RUN = [Budget(calls=2, per="run")]
INTERLEAVED = [(ALICE, 0), (BOB, 0), (BOB, 0), (ALICE, 0), (BOB, 0), (ALICE, 0), (ALICE, 0)]


@pytest.mark.parametrize("fresh", [ALICE, BOB, CAROL], ids=lambda p: p.id)
def test_a_run_shared_by_two_principals_replays_every_budget_verdict_it_had(
    store: str, fresh: Principal
) -> None:
    live, events = _live(store, TWO_PER_RUN, INTERLEAVED)
    assert live == ["allowed"] * 4 + ["denied:calls"] * 3  # two calls each, then refused
    result = _replayed(events, TWO_PER_RUN, fresh)
    assert _budget_verdicts(result) == live
    assert result.differences == [] and result.unreplayed == []


def test_a_per_principal_budget_is_judged_per_recorded_principal(store: str) -> None:
    budgets = [Budget(calls=3, per="principal"), Budget(items=5, per="run")]
    calls = [(ALICE, 2), (BOB, 3), (ALICE, 0), (ALICE, 0), (ALICE, 0), (BOB, 2), (BOB, 0), (BOB, 0)]
    live, events = _live(store, budgets, calls)
    assert live == ["allowed"] * 4 + ["denied:calls", "allowed", "denied:items", "denied:items"]
    result = _replayed(events, budgets, CAROL)
    assert _budget_verdicts(result) == live
    assert result.differences == []


def test_the_same_id_in_another_tenant_is_another_principal_on_replay(store: str) -> None:
    calls = [(ALICE, 0), (ALICE_ELSEWHERE, 0), (ALICE_ELSEWHERE, 0), (ALICE, 0), (ALICE_ELSEWHERE, 0)]
    live, events = _live(store, TWO_PER_RUN, calls)
    assert live == ["allowed"] * 4 + ["denied:calls"]
    tenants = [e.data.get("tenant") for e in events if e.kind == "authorized"]
    assert tenants == ["t1", "t2", "t2", "t1", "t2"]  # the trace says whose allowance each spent
    assert _budget_verdicts(_replayed(events, TWO_PER_RUN, ALICE)) == live


def test_a_trace_written_before_tenants_were_recorded_still_replays_by_principal() -> None:
    live, events = _live("memory://", TWO_PER_RUN, INTERLEAVED)
    older = [
        dataclasses.replace(e, data={k: v for k, v in e.data.items() if k != "tenant"})
        if e.kind == "authorized"
        else e
        for e in events
    ]
    assert all("tenant" not in e.data for e in older if e.kind == "authorized")
    assert _budget_verdicts(_replayed(older, TWO_PER_RUN, CAROL)) == live


def test_plan_nodes_of_another_principal_are_charged_to_it(store: str) -> None:
    rt = _runtime(store, TWO_PER_RUN)
    try:
        run = rt.new_run(RUN, principal=ALICE)
        for i in range(2):
            assert rt.call({"name": "look", "arguments": {"x": i}}, run_id=run, principal=ALICE).ok
        nodes = [{"id": f"n{i}", "tool": "look", "arguments": {"x": i}} for i in range(3)]
        result = rt.run_plan(Plan.from_dict({"nodes": nodes}), run_id=run, principal=BOB)
        assert sum(1 for n in result.nodes.values() if n.ok) == 2  # bob's own two calls
        events = list(rt.trace.events(run))
    finally:
        rt.close()
    live = [_verdict(e) for e in events if e.kind == "budget"]
    assert live.count("allowed") == 4 and live.count("denied:calls") == 1
    replayed = _replayed(events, TWO_PER_RUN, ALICE)
    assert _budget_verdicts(replayed) == live and replayed.differences == []


WHO = st.sampled_from([ALICE, BOB, ALICE_ELSEWHERE, CAROL])
BUDGETS = st.lists(
    st.builds(
        Budget,
        calls=st.one_of(st.none(), st.integers(0, 4)),
        items=st.integers(0, 8),
        per=st.sampled_from(["run", "principal"]),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budgets=BUDGETS,
    calls=st.lists(st.tuples(WHO, st.integers(0, 3)), min_size=1, max_size=10),
    fresh=WHO,
)
def test_any_run_of_several_principals_replays_its_budget_verdicts(
    budgets: list[Budget], calls: list[tuple[Principal, int]], fresh: Principal
) -> None:
    live, events = _live("memory://", budgets, calls)
    assert len(live) == len(calls)
    assert _budget_verdicts(_replayed(events, budgets, fresh)) == live
