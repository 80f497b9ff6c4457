"""A simple call on the memory store leaves nothing behind for the cyclic collector to walk.

Each call's compact record used to be kept as a tuple, a container the collector tracks until a
young collection first sees it: one object a call that outlived it, so a young collection came
every ~700 calls and walked every field of every record kept since (150-300 µs each, 10-30 times
a call: in the p99 of ``rt.acall``). The memory store now lays each record's fields flat in the
run's log (``trace/_memory_records.CallLog``): the collector's young count does not grow with the
calls, no young collection comes in thousands of them, and the trace reads back the same events.
Counted, never timed.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.bench._workload import add, add_async, openai_calls
from actionspace.trace.events import CallShape, expand_call
from actionspace.trace.memory import MemoryTraceStore

WARM = 1000
"""Calls before counting: the bench's warm-up, and as many as its workload's distinct call ids (the
run's flow state remembers each id's observation, replaced when the id comes again)."""
CALLS = 3000
YOUNG_PER_CALL = 0.05
"""Objects the collector tracks that a call leaves behind, at most (1.0 when records were tuples)."""


def _runtime() -> Runtime:
    rt = Runtime(store="memory://")
    rt.tool(effect="none")(add)
    rt.tool(effect="none")(add_async)
    return rt


def _caller(rt: Runtime, how: str) -> Callable[[int], Any]:
    """Call ``i`` of the bench's workload, as the bench's rows make it."""
    if how == "call":
        calls = openai_calls("add")
        return lambda i: rt.call(calls[i % len(calls)])
    calls = openai_calls("add_async" if how == "acall_async" else "add")
    loop = asyncio.new_event_loop()
    rt._test_loop = loop  # type: ignore[attr-defined]  # closed with the runtime below
    return lambda i: loop.run_until_complete(rt.acall(calls[i % len(calls)]))


@contextmanager
def _collector(enabled: bool) -> Iterator[list[int]]:
    """The young collections made meanwhile (their generations), the collector on or off, at
    Python's default thresholds; restored after."""
    was, thresholds = gc.isenabled(), gc.get_threshold()
    made: list[int] = []

    def note(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            made.append(info["generation"])

    gc.collect()
    gc.set_threshold(700, 10, 10)
    (gc.enable if enabled else gc.disable)()
    gc.callbacks.append(note)
    try:
        yield made
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
        (gc.enable if was else gc.disable)()


def _run(how: str, body: Callable[[Callable[[int], Any]], None]) -> None:
    with _runtime() as rt:
        call = _caller(rt, how)
        try:
            for i in range(WARM):
                call(i)
            body(call)
        finally:
            loop = getattr(rt, "_test_loop", None)
            if loop is not None:
                loop.close()


HOWS = ("acall_async", "acall_sync", "call")


@pytest.mark.parametrize("how", HOWS)
def test_simple_calls_leave_no_object_for_the_young_collector(how: str) -> None:
    grew: list[int] = []

    def body(call: Callable[[int], Any]) -> None:
        with _collector(enabled=False):
            before = gc.get_count()[0]
            for i in range(WARM, WARM + CALLS):
                call(i)
            grew.append(gc.get_count()[0] - before)

    _run(how, body)
    assert grew[0] <= CALLS * YOUNG_PER_CALL, grew[0]


@pytest.mark.parametrize("how", HOWS)
def test_thousands_of_simple_calls_make_no_young_collection(how: str) -> None:
    made: list[int] = []

    def body(call: Callable[[int], Any]) -> None:
        with _collector(enabled=True) as seen:
            for i in range(WARM, WARM + CALLS):
                call(i)
        made.extend(seen)

    _run(how, body)
    assert made.count(0) <= 1, made  # one at most: what the warm-up left may reach the threshold


@pytest.mark.parametrize("how", HOWS)
def test_the_calls_read_back_whole_from_the_flat_log(how: str) -> None:
    with _runtime() as rt:
        call = _caller(rt, how)
        try:
            observed = [call(i) for i in range(50)]
        finally:
            loop = getattr(rt, "_test_loop", None)
            if loop is not None:
                loop.close()
        assert isinstance(rt.trace, MemoryTraceStore)
        events = rt.trace.events(rt.run_id_of(None))
        got = [e.data.get("content_hash") for e in events if e.kind == "observation"]
        assert got == [o.content_hash for o in observed]
        assert [e.seq for e in events] == list(range(len(events)))


SHAPE = CallShape({"allowed": True}, {"verdict": "accepted"}, "lookup", "1")
_ids = st.one_of(st.none(), st.sampled_from(("a", "b", "c")))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(_ids, st.booleans(), st.sampled_from(("append_call", "append_kept", "log"))), max_size=12
    )
)
def test_a_run_reads_the_same_events_however_its_calls_were_appended(
    calls: list[tuple[str | None, bool, str]],
) -> None:
    """Records appended through ``append_call``, ``append_kept`` or the log ``call_log`` hands
    out are read back (``events``, ``call_events``) as the expansion of the records given."""
    from actionspace.trace._memory_records import CALL_WIDTH, CallLog, call_records

    store = MemoryTraceStore()
    seq, want = 0, []
    for n, (given_id, observed, how) in enumerate(calls):
        cid = given_id or f"r:n{n}"
        obs_seq = seq + 5 if observed else -1
        record = (seq, 1.0 + n, cid, SHAPE, f'{{"n": {n}}}', "lookup", given_id, f"n{n}", obs_seq, 2.0, None)
        want.extend(expand_call(record))
        if how == "append_call":
            store.append_call("r", record, ())
        else:
            kept = (*record[:3], store.shape_index(SHAPE), *record[4:])
            if how == "append_kept":
                store.append_kept("r", kept)
            else:
                log, lock, nexts = store.call_log("r")
                with lock:
                    log.append(kept)
                    nexts["r"] = max(nexts.get("r", 0), (obs_seq if observed else seq + 4) + 1)
        seq += 6 if observed else 5
    got = [(e.seq, e.kind, e.ts, e.call_id, e.data) for e in store.events("r")]
    assert got == sorted(want, key=lambda r: r[0])
    ids = {cid for _, _, _, cid, _ in want if cid is not None}
    for cid in ids:
        mine = [r for r in want if r[3] == cid]
        read = store.call_events("r", [cid], {r[1] for r in mine})
        assert [(e.seq, e.kind, e.ts, e.call_id, e.data) for e in read] == sorted(mine, key=lambda r: r[0])
    log = store._calls.get("r", CallLog())
    assert len(log) == CALL_WIDTH * len(calls)
    assert all(type(field) is not tuple for field in log)
    assert [r[2] for r in call_records(log)] == [c or f"r:n{n}" for n, (c, _, _) in enumerate(calls)]
