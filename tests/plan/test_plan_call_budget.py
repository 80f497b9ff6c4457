"""The plan's own work per node stays small: checking, starting, stepping and settling a plain
node, its ``plan_started`` entry and the plan's status take a handful of Python calls in
``actionspace.plan`` (before: 35 per node), whatever the engine does for the node's call."""

from __future__ import annotations

import asyncio
import gc
import sys
from types import FrameType
from typing import Any

from actionspace import Plan, PlanNode, Runtime

PLAN_DIR = "/actionspace/plan/"


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def quick(x: int) -> int:
        return x

    return rt


def _plan(n: int) -> Plan:
    """``n`` plain nodes; node i waits for nodes i-1 and i-3 (a DAG some waves wide)."""
    nodes = [
        PlanNode(
            id=f"n{i}",
            tool="quick",
            arguments={"x": i},
            depends_on=tuple(f"n{j}" for j in (i - 1, i - 3) if j >= 0),
        )
        for i in range(n)
    ]
    return Plan(nodes=nodes, max_concurrency=n)


def _plan_calls(rt: Runtime, plan: Plan, where: str = PLAN_DIR) -> tuple[int, Any]:
    """Python-level calls made in ``where`` (``actionspace.plan``) while ``plan`` runs, and its result."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call" and where in frame.f_code.co_filename:
            count += 1

    async def run() -> Any:
        run_id = rt.new_run()
        await rt.arun_plan(plan, run_id=run_id)  # warm: the run's tool entries exist
        sys.setprofile(profile)
        try:
            return await rt.arun_plan(plan, run_id=run_id)
        finally:
            sys.setprofile(None)

    result = asyncio.run(run())
    return count, result


def test_a_plain_node_costs_the_plan_a_handful_of_calls() -> None:
    with _runtime() as rt:
        small, ok_small = _plan_calls(rt, _plan(20))
        large, ok_large = _plan_calls(rt, _plan(220))
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    per_node = (large - small) / 200
    # 8 while the driver's end of a node and the scheduler's settling were two frames; 7 while
    # the driver asked each node of a plan of plain nodes whether it is plain; 6 while a node
    # that answered at once was begun and settled in two frames (``_plain_now``, ``_finish``); 5
    # while what a node released went into the ready queue (``ReadyQueue.extend``) and the next
    # wave came out of it (``take_all``) even when it was all the queue held (here a node a wave)
    assert per_node <= 3.5, per_node


def test_a_plain_instant_node_costs_the_whole_package_about_a_dozen_calls() -> None:
    """Its call included: 15 while the node's call looked its tool's entry up through
    ``FastPath.entry``, checked its arguments through the tool's validator and shaped an ``int``
    result generically; 11 while ``Engine.plain_node`` forwarded to the precompiled node path and
    an ``int`` result's observation was made in a frame of its own; 9 while a plan run again made
    its ``plan_started`` entries again (reading each tool's ``ToolSpec.key`` property); 8 while
    a node that answered at once was begun and settled in two frames; 7 while every node's
    arguments were asked of ``unfit_arguments`` (now only those that are not exactly its tool's
    flat names and types); 6 while the nodes a node released were queued and the next wave taken
    out of the ready queue in two calls, when they were all it held."""
    with _runtime() as rt:
        small, ok_small = _plan_calls(rt, _plan(20), "/actionspace/")
        large, ok_large = _plan_calls(rt, _plan(220), "/actionspace/")
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    per_node = (large - small) / 200
    assert per_node <= 4.5, per_node


def test_a_plain_nodes_call_enters_no_frame_of_the_engine() -> None:
    """``Engine.plain_node`` is the precompiled node path itself, bound as a method: the plan
    reaches a node's call with no forwarding frame of ``pipeline/engine.py`` per node."""
    with _runtime() as rt:
        small, ok_small = _plan_calls(rt, _plan(20), "/actionspace/pipeline/engine.py")
        large, ok_large = _plan_calls(rt, _plan(220), "/actionspace/pipeline/engine.py")
    assert ok_small.status == ok_large.status == "ok"
    assert [o.data for o in ok_large.nodes.values()] == list(range(220))
    assert (large - small) / 200 < 0.1, (small, large)  # a flush now and then, never one a node


def test_showing_a_plans_observations_at_its_end_calls_nothing_per_node(monkeypatch: Any) -> None:
    """The flow state is shown a plan's observations once it ended; what that reads of each was
    taken when its node settled, so the end makes no Python call per node (it called
    ``label_of`` once per observation, whose objects were made long before and had left the
    processor's caches)."""
    from actionspace.policy.flow import FlowState

    counts: list[int] = []
    for name in ("observed_many", "observed_taken"):
        shown = getattr(FlowState, name, None)
        if shown is None:
            continue

        def counting(self: FlowState, items: Any, _shown: Any = shown) -> None:
            calls = 0

            def profile(frame: FrameType, event: str, arg: Any) -> None:
                nonlocal calls
                calls += event == "call"

            sys.setprofile(profile)
            try:
                _shown(self, items)
            finally:
                sys.setprofile(None)
            counts.append(calls)

        monkeypatch.setattr(FlowState, name, counting)
    with _runtime() as rt:
        run_id = rt.new_run()
        asyncio.run(rt.arun_plan(_plan(20), run_id=run_id))
        result = asyncio.run(rt.arun_plan(_plan(300), run_id=run_id))
        again = rt.run_state(run_id).flow
    assert result.status == "ok"
    assert all(o.provenance.labels for o in result.nodes.values())  # each is read for its label
    # the first plan of the run adds its labels' first call ids; the second finds them at their cap
    assert len(counts) == 2 and counts[1] < 30, counts
    assert set(again.seen) >= {o.call_id for o in result.nodes.values()}  # and every one was shown


def test_a_plain_node_whose_tool_waits_costs_the_plan_a_dozen_calls() -> None:
    """A node whose tool waits gets a task of its own, its call begun at once as that task,
    resumed and settled in it: 5 Python calls in ``actionspace.plan`` per node (10, under a
    budget of 14, while its task asked whether the node is plain although the plan said every
    node is, its end asked whether the plan had settled while other nodes still ran, and its
    compact record was buffered in a frame of its own, ``_buffer``; 7 while its call was begun
    in a frame of its own, ``_plain_now``, and its end went through ``_then``). Two of
    them are making its task, and the node's frame resumed once more when its task first runs
    after the driver took its first step."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        await asyncio.sleep(0)
        return x

    def plan(n: int) -> Plan:
        nodes = [PlanNode(id=f"n{i}", tool="nap", arguments={"x": i}) for i in range(n)]
        return Plan(nodes=nodes, max_concurrency=n)

    per_node = float("inf")
    with rt:
        for _ in range(3):  # the fewest of three: a time-driven flush of a slow machine is no node's cost
            small, ok_small = _plan_calls(rt, plan(20))
            large, ok_large = _plan_calls(rt, plan(220))
            assert ok_small.status == ok_large.status == "ok"
            assert [o.data for o in ok_large.nodes.values()] == list(range(220))
            per_node = min(per_node, (large - small) / 200)
    assert per_node <= 5.5, per_node


def test_a_plain_node_whose_tool_waits_costs_the_whole_package_seventeen_calls() -> None:
    """Its call, its task and its tool's deadline included: 23 while its task asked whether the
    node is plain (the plan had said so for every node), its end asked whether the plan had
    settled while other nodes still ran, its compact record was buffered in a frame of its own
    and an ``int`` result's observation was made in one (``fast_nodes._int_observation``); 19
    while its call was begun in a frame of its own (``_plain_now``) and its end went through
    ``_then``."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        await asyncio.sleep(0)
        return x

    def plan(n: int) -> Plan:
        nodes = [PlanNode(id=f"n{i}", tool="nap", arguments={"x": i}) for i in range(n)]
        return Plan(nodes=nodes, max_concurrency=n)

    per_node = float("inf")
    with rt:
        for _ in range(3):  # the fewest of three, as above
            small, ok_small = _plan_calls(rt, plan(20), "/actionspace/")
            large, ok_large = _plan_calls(rt, plan(220), "/actionspace/")
            assert ok_small.status == ok_large.status == "ok"
            assert [o.data for o in ok_large.nodes.values()] == list(range(220))
            per_node = min(per_node, (large - small) / 200)
    assert per_node <= 17.5, per_node


def test_no_young_collection_falls_while_a_waves_calls_begin() -> None:
    """The calls of a wave whose tool waits begin one after the other before the loop turns
    (``Driver._hand_on``); each leaves its task, its coroutines, its recorder and its timer
    alive, about 20 tracked objects a node, so the cyclic collector's young generation filled
    two or three times while a hundred began, each collection walking objects just made (none of
    them garbage) between one call's start and the next. It pauses while they begin and collects
    once they all began, while they wait. Counted by the collector's own callbacks: the collections
    seen by the first call's first step and by the last one's are the same (the code before saw
    five between them for 220 nodes)."""
    collections = [0]

    def counting(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop":
            collections[0] += 1

    rt = Runtime("memory://", recover_on_start=False)
    seen: list[int] = []

    @rt.tool(effect="none")
    async def nap(x: int) -> int:
        seen.append(collections[0])  # at the call's first step, as it begins
        await asyncio.sleep(0)
        return x

    nodes = [PlanNode(id=f"n{i}", tool="nap", arguments={"x": i}) for i in range(220)]
    plan = Plan(nodes=nodes, max_concurrency=220)
    was_enabled, threshold = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)  # the interpreter's defaults, whatever the test run set
    gc.callbacks.append(counting)
    try:
        with rt:
            run_id = rt.new_run()
            rt.run_plan(plan, run_id=run_id)  # warm: the run's tool entry exists
            for _ in range(3):
                seen.clear()
                gc.collect()
                result = rt.run_plan(plan, run_id=run_id)
                assert result.status == "ok" and [o.data for o in result.nodes.values()] == list(range(220))
                assert len(seen) == 220
                assert seen[-1] == seen[1], (seen[1], seen[-1])  # n0 keeps the driver, n1… get tasks
            assert gc.isenabled()  # resumed once they began
    finally:
        gc.callbacks.remove(counting)
        gc.set_threshold(*threshold)
        if not was_enabled:
            gc.disable()


def _started_entries(value: Any) -> int:
    """How many ``plan_started`` node entries ``marshal.dumps(value)`` encodes: a batch of trace
    records (the memory store's), or one event's data."""
    if isinstance(value, dict):
        nodes = value.get("nodes") if "edges" in value else None
        return len(nodes) if isinstance(nodes, list) else 0
    if isinstance(value, tuple):
        return sum(
            len(r[4]["nodes"])
            for r in value
            if isinstance(r, tuple) and len(r) == 5 and r[1] == "plan_started"
        )
    return 0


def test_a_plan_run_again_has_its_plan_started_encoded_once(monkeypatch: Any) -> None:
    """A plan object run again keeps its check, and with it ``plan_started``'s encoding: its runs
    after the first hand the memory store that encoding, and no node entry is built or encoded
    again (1 a node each run while every run built its entries and edge lists and the store
    encoded them: 1,000 dicts and about 2,000 lists for this plan)."""
    import marshal

    encoded = 0
    dumps = marshal.dumps

    def counting(value: Any, *args: Any) -> bytes:
        nonlocal encoded
        encoded += _started_entries(value)
        return dumps(value, *args)

    plan = _plan(1000)  # plan_started weighs more than a batch of records: packed at once before
    with _runtime() as rt:
        run_id = rt.new_run()
        assert rt.run_plan(plan, run_id=run_id).status == "ok"  # its check kept, and encoded
        monkeypatch.setattr(marshal, "dumps", counting)
        for _ in range(3):
            result = rt.run_plan(plan, run_id=run_id)
            assert result.status == "ok" and len(result.nodes) == 1000
        monkeypatch.setattr(marshal, "dumps", dumps)
        started = [e.data for e in rt.trace.events(run_id) if e.kind == "plan_started"]
    assert len(started) == 4 and all(s == started[0] for s in started)
    assert [n["id"] for n in started[3]["nodes"]] == [f"n{i}" for i in range(1000)]
    assert encoded / 3 / 1000 == 0, encoded


class _Asked(dict[Any, Any]):
    """A dict that counts the lookups made through ``get``."""

    asked = 0

    def get(self, key: Any, default: Any = None) -> Any:
        type(self).asked += 1
        return super().get(key, default)


def test_a_plain_nodes_entry_is_checked_once_per_plan_and_tool() -> None:
    """The run's resolution of a node's tool and the precompiled entry built for it are looked up
    once per plan and tool (``pipeline/fast_nodes.py``: the entry kept for the plan while
    ``actionspace._epoch.EPOCH`` stays where it was checked), not once per node (1 each before)."""
    with _runtime() as rt:
        run_id = rt.new_run()
        rt.run_plan(_plan(5), run_id=run_id)  # resolves the tool, builds its entry
        run = rt.engine.run(run_id)
        run.resolved = _Asked(run.resolved)
        fast = rt.engine.fast
        fast._entries = _Asked(fast._entries)
        counts = []
        for n in (20, 220):
            _Asked.asked = 0
            result = rt.run_plan(_plan(n), run_id=run_id)
            assert result.status == "ok" and [o.data for o in result.nodes.values()] == list(range(n))
            counts.append(_Asked.asked)
    assert counts[1] - counts[0] == 0, counts  # 400 while each node checked its entry


def test_a_plan_run_again_encodes_none_of_its_nodes_records(monkeypatch: Any) -> None:
    """A plain node's record, whose arguments are plain values, is kept by the memory store as a
    row the collector stops tracking (trace/_node_rows.py): nothing of it is encoded. Before, the
    store packed every 512 node records with ``marshal`` (about a tenth of a zero-latency plan's
    time): five encodings, of 82-117 KB each, over three runs of a 1,100-node plan."""
    import marshal

    dumps = marshal.dumps
    encoded: list[int] = []

    def counting(value: Any, *args: Any) -> bytes:
        blob = dumps(value, *args)
        encoded.append(len(blob))
        return blob

    plan = _plan(1100)
    with _runtime() as rt:
        run_id = rt.new_run()
        assert rt.run_plan(plan, run_id=run_id).status == "ok"
        monkeypatch.setattr(marshal, "dumps", counting)
        for _ in range(3):
            result = rt.run_plan(plan, run_id=run_id)
            assert [o.data for o in result.nodes.values()] == list(range(1100))
        monkeypatch.setattr(marshal, "dumps", dumps)
        proposed = [e.data for e in rt.trace.events(run_id) if e.kind == "proposed"]
    assert len(proposed) == 4 * 1100 and proposed[-1] == {
        "tool": "quick",
        "version": "1",
        "arguments": {"x": 1099},
    }
    assert encoded == [], encoded
