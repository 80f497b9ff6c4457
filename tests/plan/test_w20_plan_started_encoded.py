"""A plan's ``plan_started`` handed to the memory trace store as its encoding, made once per
checked plan (``plan/run.py`` ``_started``, ``trace/_encoded.py``): a plan object run again keeps
its check, so every run after the first records it without building or encoding it again. What
is recorded does not change: generated plans, run again, retried, on a run whose label marks its
events or not, read back the very ``plan_started`` the data made anew for each run gives."""

from __future__ import annotations

import asyncio
import copy
import marshal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace.plan import run as plan_run
from actionspace.plan.model import PlanResult
from actionspace.policy.labels import Label
from actionspace.trace._encoded import Encoded, encoded

TOOLS = ("quick", "fetch", "gated")
"""``quick``: a plain tool (a bare plan's); ``fetch`` declares reads; ``gated`` needs approval."""


def _runtime(url: str = "memory://") -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    @rt.tool(effect="read", reads=["doc:{x}"])
    def fetch(x: int) -> int:
        return x + 1

    @rt.tool(effect="none", requires_approval=True)
    def gated(x: int) -> int:
        return x

    return rt


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    n = draw(st.integers(min_value=1, max_value=12))
    tools = st.sampled_from(TOOLS) if draw(st.booleans()) else st.just("quick")
    nodes = []
    for i in range(n):
        earlier = [f"n{j}" for j in range(i)]
        deps = draw(st.lists(st.sampled_from(earlier), max_size=3, unique=True)) if earlier else []
        nodes.append(
            PlanNode(
                id=f"n{i}",
                tool=draw(tools),
                arguments={"x": draw(st.integers(0, 5))},
                depends_on=tuple(deps),
            )
        )
    return Plan(nodes=nodes, max_concurrency=draw(st.sampled_from((None, 3))))


def _runs(rt: Runtime, plan: Plan, rounds: list[str], *, secret: bool = False) -> list[dict[str, Any]]:
    """Run ``plan`` once per item of ``rounds`` on one run (``"retry"``: as a retry of the run
    before, if any); the ``plan_started`` data the trace reads back, in order."""
    run = rt.new_run()
    if secret:
        rt.engine.run(run).flow.add_user_input("the code", Label(confidentiality="secret"))

    async def go() -> None:
        before: PlanResult | None = None
        for how in rounds:
            before = await rt.arun_plan(plan, run_id=run, retry_of=before if how == "retry" else None)

    asyncio.run(go())
    return [dict(e.data) for e in rt.trace.events(run) if e.kind == "plan_started"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=plans(),
    rounds=st.lists(st.sampled_from(("again", "retry")), min_size=1, max_size=4),
    secret=st.booleans(),
)
def test_plan_started_reads_back_as_the_data_made_anew_for_each_run(
    plan: Plan, rounds: list[str], secret: bool
) -> None:
    with _runtime() as rt:
        got = _runs(rt, plan, rounds, secret=secret)
    with pytest.MonkeyPatch.context() as m, _runtime() as rt:
        m.setattr(plan_run, "_MEMORY_APPEND", None)  # every store's way: the data made anew
        want = _runs(rt, plan, rounds, secret=secret)
    assert got == want
    assert len(got) == len(rounds)
    assert [g["retry"] for g in got] == [how == "retry" and i > 0 for i, how in enumerate(rounds)]
    assert all(("label" in g) is secret for g in got)


def test_a_plan_run_again_shares_one_encoding_and_each_read_gets_objects_of_its_own() -> None:
    plan = Plan(nodes=[PlanNode(id=f"n{i}", tool="quick", arguments={"x": i}) for i in range(30)])
    with _runtime() as rt:
        run = rt.new_run()
        for _ in range(3):
            assert rt.run_plan(plan, run_id=run).status == "ok"
        store: Any = rt.trace
        kept = store._encoded[run]
        assert len(kept) == 3 and kept[0][4] is kept[1][4] is kept[2][4]  # the same bytes, not copies
        first = [e for e in rt.trace.events(run) if e.kind == "plan_started"]
        first[0].data["nodes"].clear()  # a reader changing what it read changes nothing stored
        again = [e for e in rt.trace.events(run) if e.kind == "plan_started"]
    assert [len(e.data["nodes"]) for e in again] == [30, 30, 30]
    assert again[0].data is not again[1].data and again[0].data["nodes"] is not again[1].data["nodes"]
    assert again[0].data == again[2].data


@pytest.mark.parametrize("store", ["sqlite", "secret"])
def test_other_stores_and_labelled_runs_get_data_of_their_own(store: str, tmp_path: Path) -> None:
    """A store other than the memory one, and a run whose label the recorder adds to each event
    (a copy of the data that would share its lists), get the data made anew each run."""
    seen: list[Any] = []
    plan = Plan(nodes=[PlanNode(id=f"n{i}", tool="quick", arguments={"x": i}) for i in range(5)])
    url = f"sqlite:///{tmp_path / 'a.db'}" if store == "sqlite" else "memory://"
    with _runtime(url) as rt:
        real = plan_run._started_data

        def noted(checked: Any, retry: bool) -> dict[str, Any]:
            data = real(checked, retry)
            seen.append(data)
            return data

        plan_run._started_data = noted
        try:
            got = _runs(rt, plan, ["again", "again", "again"], secret=store == "secret")
        finally:
            plan_run._started_data = real
    assert len(seen) == 3 and not any(isinstance(s, Encoded) for s in seen)
    assert len({id(s["nodes"]) for s in seen}) == 3
    assert got[0]["nodes"] == [{"id": f"n{i}", "tool": "quick@1"} for i in range(5)]
    assert got[0] == got[1] == got[2]


class _Id(str):
    """A node id of a ``str`` subclass: ``marshal`` refuses it."""


def test_data_marshal_cannot_encode_as_it_is_is_recorded_made_anew() -> None:
    assert encoded({"nodes": [{"id": _Id("a")}]}) is None
    assert encoded({"nodes": [{"id": "a"}], "retry": True}) == {"nodes": [{"id": "a"}], "retry": True}
    plan = Plan(nodes=[PlanNode(id=_Id("a"), tool="quick", arguments={"x": 1})])
    with _runtime() as rt:
        got = _runs(rt, plan, ["again", "again"])
        assert not getattr(rt.trace, "_encoded", {})  # nothing kept encoded
    assert (
        got
        == [{"nodes": [{"id": "a", "tool": "quick@1"}], "edges": [], "added_edges": [], "retry": False}] * 2
    )


@settings(max_examples=60, deadline=None)
@given(
    data=st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=12,
        ),
        max_size=4,
    ),
    batch=st.booleans(),
)
def test_the_memory_store_reads_an_encoded_record_back_as_its_data(data: dict[str, Any], batch: bool) -> None:
    """Alone, a record whose data came encoded is kept as its encoding; in a batch with other
    records (no caller of ours sends one) it is kept as a dict, packed with them (``marshal``
    refuses the subclass: pickled, it reads back a plain dict)."""
    from actionspace.trace.memory import COMPACT_AT, MemoryTraceStore

    kept = encoded(data)
    assert kept is not None and marshal.loads(kept.blob) == data
    store = MemoryTraceStore()
    store.append_records("r", [(0, "run_started", 1.0, None, {"principal": "p"})])
    mine = (1, "plan_started", 2.0, None, kept)
    if batch:
        filler = [(2 + i, "note", 3.0, None, {"i": i}) for i in range(COMPACT_AT)]  # packed at once
        store.append_records("r", [mine, *filler])
    else:
        store.append_records("r", [mine])
    (event,) = [e for e in store.events("r") if e.seq == 1]
    assert type(event.data) is dict and event.data == data
    assert event.kind == "plan_started" and event.ts == 2.0
    assert store.next_seq("r") == (2 + COMPACT_AT if batch else 2)
    want = copy.deepcopy(data)
    if event.data:
        event.data.clear()
    assert [e.data for e in store.events("r") if e.seq == 1] == [want]
