"""A run ends once: of two servers that both reach the end of the same run (one stalled past its
lease while the other took the run over, or both after it was released), one writes
``run_finished`` and the other writes nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.service import RunnerConfig
from actionspace.service.continuation import SUBMITTED_KIND, adopt, release, submission_event
from actionspace.service.runner import BackgroundRuns
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS
from tests.service.test_w27_run_continuation import Tally, _node, _runtime

PLAN = {"nodes": [_node("a", "stamp")]}


@contextmanager
def _servers(store: str, count: int) -> Iterator[list[tuple[Runtime, BackgroundRuns]]]:
    made = []
    try:
        for _ in range(count):
            rt = _runtime(store, Tally())
            made.append((rt, BackgroundRuns(rt, RunnerConfig(driver_lease_s=60.0))))
        yield made
    finally:
        for rt, runner in made:
            runner.close()
            rt.close()


def _started(rt: Runtime, run_id: str, server: str, until: float) -> None:
    rt.new_run(run_id, principal=TOKENS["agent-token"])
    rt.record(run_id, SUBMITTED_KIND, submission_event("plan", PLAN, server, until))


def _hold_first_read(rt: Runtime, read: threading.Event, go: threading.Event) -> None:
    """The next read of ``rt``'s trace returns only once ``go`` is set (``read`` says it was made)."""
    real = rt.trace.events
    armed = [True]

    def events(run_id: str) -> list[TraceEvent]:
        got = real(run_id)
        if armed[0]:
            armed[0] = False
            read.set()
            assert go.wait(20), "the test never let the read return"
        return got

    rt.trace.events = events  # type: ignore[method-assign]


def _ends(store: str, run_id: str) -> list[dict[str, Any]]:
    reader = Runtime(store, recover_on_start=False)
    try:
        return [dict(e.data) for e in reader.trace.events(run_id) if e.kind == "run_finished"]
    finally:
        reader.close()


def test_a_stalled_driver_that_read_its_trace_before_the_take_over_does_not_end_the_run_again(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _servers(store, 2) as [(rt_a, a), (rt_b, b)]:
        _started(rt_a, "r", a._drives.server, until=time.time() - 1)  # a's lease has ended
        read, go = threading.Event(), threading.Event()
        _hold_first_read(rt_a, read, go)
        stalled = threading.Thread(target=a._finish, args=("r",), kwargs={"status": "ok", "nodes": 1})
        stalled.start()
        assert read.wait(20)  # a read the trace: it still drives the run, as far as it knows
        assert adopt(rt_b, "r", b._drives.server, lease_s=60.0) is not None
        b._finish("r", status="partial", nodes=1, failed={"a": "conflict"})
        go.set()
        stalled.join(20)
        assert not stalled.is_alive()
    ends = _ends(store, "r")
    assert len(ends) == 1
    assert ends[0]["status"] == "partial" and ends[0]["server"] == b._drives.server


@pytest.mark.parametrize("servers", [2, 4])
def test_of_servers_that_all_end_a_released_run_at_once_one_writes_the_end(
    tmp_path: Path, servers: int
) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _servers(store, servers) as made:
        first_rt, first = made[0]
        _started(first_rt, "r", first._drives.server, until=time.time() + 60)
        release(first_rt, ["r"], first._drives.server)  # no server drives it now
        everyone = threading.Barrier(servers)
        gates = []
        for rt, _runner in made:
            read, go = threading.Event(), threading.Event()
            _hold_first_read(rt, read, go)
            gates.append((read, go))

        def finish(runner: BackgroundRuns) -> None:
            everyone.wait(20)
            runner._finish("r", status="ok")

        threads = [threading.Thread(target=finish, args=(runner,)) for _rt, runner in made]
        for thread in threads:
            thread.start()
        for read, _go in gates:
            assert read.wait(20)  # every server read the trace before any wrote the end
        for _read, go in gates:
            go.set()
        for thread in threads:
            thread.join(20)
    assert len(_ends(store, "r")) == 1


def test_a_secret_run_keeps_its_label_on_the_end(tmp_path: Path) -> None:
    from actionspace.policy.labels import Label

    store = f"sqlite:///{tmp_path / 'store.db'}"
    with _servers(store, 1) as [(rt, runner)]:
        _started(rt, "s", runner._drives.server, until=time.time() + 60)
        rt.run_state("s").flow.context = Label(confidentiality="secret")
        runner._finish("s", status="ok")
    ends = _ends(store, "s")
    assert len(ends) == 1 and ends[0]["label"]["confidentiality"] == "secret"
