"""The memory store's record of a simple call goes in without the store's lock once the run has a
next number (pipeline/_direct.py): the number is raised with no call between its read and its
store, then the record appended. Here that path races, on one run, with the store's locked writers
(records appended, notes recorded) and its readers, threads switched as often as the interpreter
allows: no record is lost, no number repeats, and the run's next number never goes back."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.trace._memory_records import CALL_WIDTH
from actionspace.trace.memory import MemoryTraceStore
from tests.pipeline.test_fast import _view

RUN = "run-kept"


def _entry(a: int, call_id: str) -> str:
    arguments = json.dumps({"a": a, "b": 1})
    return json.dumps(
        {"id": call_id, "type": "function", "function": {"name": "add", "arguments": arguments}}
    )


@pytest.fixture
def switching() -> Iterator[None]:
    """Threads switched at every chance the interpreter takes (restored after)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


@pytest.mark.usefixtures("switching")
def test_unlocked_records_race_the_stores_locked_writers_and_readers() -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls, per_thread, notes = 3, 300, 400
    errors: list[BaseException] = []
    seen_next: list[int] = []
    done = threading.Event()
    with rt:
        rt.new_run(RUN)
        store = rt.trace
        assert isinstance(store, MemoryTraceStore)
        run = rt.run_state(RUN)
        asyncio.run(rt.acall(_entry(0, "warm"), run_id=RUN))  # the run's first number, under the lock
        start = threading.Barrier(calls + 2)

        def caller(t: int) -> None:
            async def play() -> None:
                for i in range(per_thread):
                    obs = await rt.acall(_entry(t * 10_000 + i, f"c{t}_{i}"), run_id=RUN)
                    assert obs.data == t * 10_000 + i + 1

            try:
                start.wait()
                asyncio.run(play())
            except BaseException as exc:  # noted for the assert below
                errors.append(exc)

        def writer() -> None:  # numbered from the run, appended under the store's lock
            try:
                start.wait()
                for i in range(notes):
                    if i % 2:
                        store.append_records(
                            RUN, [(next(run.seq), "user_input", time.time(), None, {"i": i})]
                        )
                    else:
                        rt.record(RUN, "user_input", {"note": i})
            except BaseException as exc:  # noted for the assert below
                errors.append(exc)

        def reader() -> None:
            try:
                start.wait()
                while not done.is_set():
                    seen_next.append(store.next_seq(RUN))
                    store.events(RUN)
            except BaseException as exc:  # noted for the assert below
                errors.append(exc)

        threads = [threading.Thread(target=caller, args=(t,)) for t in range(calls)]
        threads.append(threading.Thread(target=writer))
        watcher = threading.Thread(target=reader)
        for thread in [*threads, watcher]:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        watcher.join()
        events = store.events(RUN)
        kept = len(store.call_log(RUN)[0]) // CALL_WIDTH  # calls whose record went in as kept (raced here)
        final = store.next_seq(RUN)
    assert errors == []
    assert kept > 20, kept  # how many depends on the interleaving (250-870 of 900 seen)
    seqs = [e.seq for e in events]
    assert len(seqs) == len(set(seqs)), "an event number repeats"
    assert final == max(seqs) + 1
    assert seen_next == sorted(seen_next), "the run's next number went back"
    observed = {e.call_id for e in events if e.kind == "observation"}
    assert {f"c{t}_{i}" for t in range(calls) for i in range(per_thread)} <= observed
    assert sum(1 for e in events if e.kind == "user_input") == notes


def _played(steps: list[tuple[str, int, int]], *, direct: bool) -> tuple[Any, ...]:
    """``steps`` on two runs: a simple call (``a``), a note recorded, or records appended under the
    store's lock with the run's own numbers (as other writers of a run do)."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none", labels={"confidentiality": "public", "integrity": "trusted"})
    async def add(a: int, b: int) -> int:
        """Add two integers (public and trusted: each call's record is its call id's alone)."""
        return a + b

    if not direct:
        rt.engine.quick = rt.engine.messages.quick
    views: list[Any] = []
    with rt:
        runs = [rt.new_run(f"{RUN}-{k}") for k in range(2)]

        async def play() -> list[Any]:
            out = []
            for i, (what, k, a) in enumerate(steps):
                run_id = runs[k]
                if what == "call":
                    out.append(await rt.acall(_entry(a, f"c{i}"), run_id=run_id))
                elif what == "note":
                    rt.record(run_id, "user_input", {"note": a})
                else:
                    seq = rt.run_state(run_id).seq
                    assert isinstance(rt.trace, MemoryTraceStore)
                    rt.trace.append_records(run_id, [(next(seq), "user_input", 0.0, None, {"i": a})])
            return out

        observations = asyncio.run(play())
        for run_id in runs:
            views.append(_view(rt, run_id, [o for o in observations if o.call_id.startswith("c")]))
            views.append(rt.trace.next_seq(run_id))
    return tuple(views)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["call", "call", "call", "note", "append"]), st.integers(0, 1), st.integers(-3, 3)
        ),
        min_size=1,
        max_size=12,
    )
)
def test_records_kept_without_the_lock_leave_what_the_general_path_leaves(
    steps: list[tuple[str, int, int]],
) -> None:
    """The first call of a run sets its next number under the lock, later ones raise it without:
    both, between notes and records other writers append, leave the events, observations, flow
    state and next numbers ``Messages.quick`` leaves."""
    assert _played(steps, direct=True) == _played(steps, direct=False)
