"""The scan for runs whose driver is gone: a server picks such a run up when it starts, as the
principal that started it; never a run whose driver's lease holds, one waiting for a person, or
any when resuming is turned off; hostile lease values in a trace never make it take a run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.service import RunnerConfig, create_app
from actionspace.service.continuation import DRIVER_KIND, SUBMITTED_KIND, lease_of, submission_event
from actionspace.trace.events import TraceEvent
from tests.service.apptools import TOKENS
from tests.service.test_w27_run_continuation import Tally, _finished, _node, _runtime

LEASE_S = 0.4
PLAN = {"nodes": [_node("a", "stamp"), _node("b", "stamp", "a")]}


def _orphan(rt: Runtime, run_id: str, *, until: Any, at: float) -> None:
    """A run the agent started on a server that died at ``at`` before running anything."""
    rt.new_run(run_id, principal=TOKENS["agent-token"])
    data = submission_event("plan", PLAN, "dead-server")
    data["until"] = until
    seq = rt.trace.next_seq(run_id)
    rt.trace.append_many([TraceEvent(run_id=run_id, seq=seq, kind=SUBMITTED_KIND, ts=at, data=data)])


@contextmanager
def _server(store: str, tally: Tally, **config: Any) -> Iterator[tuple[Runtime, FastAPI]]:
    rt = _runtime(store, tally)
    app = create_app(
        rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.02, driver_lease_s=LEASE_S, **config)
    )
    try:
        with TestClient(app):
            yield rt, app
    finally:
        app.state.runner.close()
        rt.close()


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.02)


def test_a_server_picks_up_at_start_a_run_its_dead_driver_never_ran_as_its_principal(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    writer = _runtime(store, Tally())
    _orphan(writer, "o1", until=time.time() - 60, at=time.time() - 60)
    writer.close()
    with _server(store, tally) as (rt, _app):
        _until(lambda: _finished(rt.trace.events("o1")), "the run was never picked up")
        assert tally.counts == {"a": 1, "b": 1}
        assert [f["status"] for f in _finished(rt.trace.events("o1"))] == ["ok"]
        allowed = [e.data for e in rt.trace.events("o1") if e.kind == "authorized"]
        assert allowed and {d.get("principal") for d in allowed} == {"agent"}


def test_resume_orphans_off_picks_up_nothing(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    writer = _runtime(store, Tally())
    _orphan(writer, "o2", until=time.time() - 60, at=time.time() - 60)
    writer.close()
    with _server(store, tally, resume_orphans=False) as (rt, _app):
        threading.Event().wait(4 * LEASE_S)
        assert tally.counts == {}
        assert _finished(rt.trace.events("o2")) == []
        assert not [e for e in rt.trace.events("o2") if e.kind == DRIVER_KIND]


def test_a_run_whose_driver_lease_holds_or_that_waits_for_a_person_is_left_alone(tmp_path: Path) -> None:
    store, tally = f"sqlite:///{tmp_path / 'store.db'}", Tally()
    writer = _runtime(store, Tally())
    _orphan(writer, "held", until=time.time() + 3600, at=time.time() - 60)
    writer.close()
    with _server(store, tally) as (rt, _app):
        threading.Event().wait(4 * LEASE_S)
        assert tally.counts == {}
        assert _finished(rt.trace.events("held")) == []


_UNTIL = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(until=_UNTIL, renewed=st.lists(_UNTIL, max_size=3))
def test_hostile_lease_values_never_make_a_scan_take_a_run_whose_lease_holds(
    until: Any, renewed: list[Any]
) -> None:
    from actionspace.service.leases import LapsedRuns

    rt = Runtime("memory://", recover_on_start=False)
    try:
        now = time.time()
        _orphan(rt, "h", until=until, at=now - 60)
        for value in renewed:
            event = {"action": "renewed", "server": "dead-server", "until": value}
            seq = rt.trace.next_seq("h")
            rt.trace.append_many([TraceEvent(run_id="h", seq=seq, kind=DRIVER_KIND, ts=now - 60, data=event)])
        later = now + 10  # the run has been quiet for a while
        found = LapsedRuns(rt, LEASE_S)(lambda _run: False, later)
        lease = lease_of(rt.trace.events("h"))
        assert lease is not None
        if found:
            assert found == ["h"] and lease.until is not None and lease.until < later
        elif lease.until is not None and lease.until < later:
            raise AssertionError(f"a lease that ended at {lease.until} was not found")
    finally:
        rt.close()
