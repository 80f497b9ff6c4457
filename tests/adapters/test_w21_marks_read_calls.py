"""A framework mark rebuilt from the trace reads the held calls' events, not the run's.

A run resumed in another process rebuilds the marks its held calls lost from their
``approval_requested`` events (``adapters/_marks.py``, ``from_trace``). It read the run's whole
trace for them: a run of thousands of events was decoded whole to find a handful. Now it asks the
store for the events of those call ids of the kinds that number their handlings, name their
requests and end them held (``_call_events.ReadsCallEvents``), on the memory, SQLite and PostgreSQL
stores alike. Counted: the events the stores hand over (not time). The marks rebuilt are those the
whole trace gives: generated holds, handlings and marks, rebuilt both ways on each store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.adapters._bridge import Bridge
from actionspace.adapters._marks import from_trace, marks
from actionspace.approval.requests import ApprovalRequest
from actionspace.trace.events import CALL_START_KINDS, TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.pg import fresh_schema

KEY = "framework_marks"
LONG = 20_000


class _Requests:
    """Approval requests by id; an update compares the status, as the stores do."""

    def __init__(self, requests: Sequence[ApprovalRequest]) -> None:
        self.kept = {r.id: r for r in requests}

    def get(self, request_id: str) -> ApprovalRequest | None:
        return self.kept.get(request_id)

    def update(self, request_id: str, expected: Collection[str], request: ApprovalRequest) -> ApprovalRequest:
        assert self.kept[request_id].status in expected
        self.kept[request_id] = request
        return request


def _bridge(trace: object, requests: _Requests) -> Bridge:
    rt = SimpleNamespace(trace=trace, approvals=SimpleNamespace(store=requests))
    return cast(Bridge, SimpleNamespace(rt=rt))


def _request(request_id: str, run_id: str, tool: str, found: Sequence[str]) -> ApprovalRequest:
    details: dict[str, Any] = {KEY: list(found)} if found else {}
    return ApprovalRequest(
        id=request_id,
        run_id=run_id,
        node_id=f"n-{request_id}",
        tool=tool,
        args_digest="d",
        arguments={},
        provenance={},
        details=details,
    )


class _Whole:
    """A store read whole: ``events`` alone, as the rebuild read every store before."""

    def __init__(self, store: TraceStore) -> None:
        self._store = store

    def events(self, run_id: str) -> list[TraceEvent]:
        return self._store.events(run_id)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    opened: TraceStore
    if request.param == "memory":
        opened = MemoryTraceStore()
    elif request.param == "sqlite":
        opened = SqliteTraceStore(tmp_path / "t.db")
    else:
        from actionspace.trace.postgres import PostgresTraceStore

        schemas = fresh_schema(request.getfixturevalue("pg_url"))
        opened = PostgresTraceStore(next(schemas))
    try:
        yield opened
    finally:
        opened.close()
        if request.param == "postgres":
            next(schemas, None)


def _counted(store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the events every read of ``store`` hands over (``events``, ``call_events``)."""
    handed = [0]
    for name in ("events", "call_events"):
        read: Callable[..., list[TraceEvent]] | None = getattr(store, name, None)
        if read is None:
            continue

        def counting(*args: Any, _read: Callable[..., list[TraceEvent]] = read) -> list[TraceEvent]:
            found = _read(*args)
            handed[0] += len(found)
            return found

        monkeypatch.setattr(store, name, counting)
    return handed


def _held(run_id: str, seq: int, call_id: str, request_id: str | None, tool: str) -> list[TraceEvent]:
    """A handling of ``call_id`` that ended held: on request ``request_id`` (None: on a request
    pending already for an identical call, which names none)."""
    kinds: list[tuple[str, dict[str, Any]]] = [
        ("authorized", {"tool": tool}),
        ("validated", {"ok": True}),
    ]
    if request_id is not None:
        kinds.append(("approval_requested", {"request_id": request_id, "tool": tool}))
    kinds.append(("observation", {"status": "error", "category": "needs_approval"}))
    return [
        TraceEvent(run_id=run_id, seq=seq + i, kind=kind, ts=1.0 + seq + i, call_id=call_id, data=data)
        for i, (kind, data) in enumerate(kinds)
    ]


def _noise(run_id: str, seq: int, n: int) -> list[TraceEvent]:
    """``n`` events of other calls: a long run's answered calls."""
    kinds = itertools.cycle(["model_output", "authorized", "validated", "dispatched", "observation"])
    return [
        TraceEvent(
            run_id=run_id,
            seq=seq + i,
            kind=kind,
            ts=1.0 + seq + i,
            call_id=None if kind == "model_output" else f"k{i // 5}",
            data={"status": "ok"} if kind == "observation" else {},
        )
        for i, kind in zip(range(n), kinds, strict=False)
    ]


def test_a_mark_rebuilt_against_a_long_run_reads_the_held_calls_events_alone(
    store: TraceStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = "long-run"
    events = _noise(run, 0, LONG // 2)
    events += _held(run, len(events), "c1", "q1", "charge@1")
    events += _noise(run, len(events), LONG // 2)
    for start in range(0, len(events), 2_000):
        store.append_many(events[start : start + 2_000])
    requests = _Requests([_request("q1", run, "charge@1", [])])
    handed = _counted(store, monkeypatch)
    assert from_trace(_bridge(store, requests), [requests.kept["q1"]], KEY, "conv-1", ["c1", "c9"])
    assert marks(requests.kept["q1"], KEY) == ["conv-1:c1"]
    assert handed[0] <= 4, handed  # the held call's four events, not the run's 20,004


# -- the marks rebuilt are the whole trace's ------------------------------------------------------

_CALLS = ("c1", "c2")
_REQUESTS = ("q1", "q2")
_TOOLS = ("t@1", "u@1")
_MARKS = st.lists(st.sampled_from([f"{fw}:{c}" for fw in ("fw", "other") for c in _CALLS]), max_size=2)

_HANDLING = st.tuples(
    st.sampled_from(_CALLS),
    st.sampled_from(["named", "named", "unnamed", "answered", "asked"]),  # asked: a request, no hold seen
    st.sampled_from(_REQUESTS),
    st.sampled_from(_TOOLS),
    st.lists(st.sampled_from(sorted(CALL_START_KINDS)), min_size=1, max_size=3, unique=True),  # its stages
    st.integers(0, 3),  # events of other calls and kinds before it
)
_PENDING = st.lists(
    st.tuples(st.sampled_from(_REQUESTS), st.sampled_from(_TOOLS), _MARKS),
    min_size=1,
    max_size=3,
    unique_by=lambda p: p[0],
)
_runs = itertools.count()


def _trace(run_id: str, handlings: Sequence[tuple[str, str, str, str, list[str], int]]) -> list[TraceEvent]:
    out: list[TraceEvent] = []

    def add(kind: str, call_id: str | None, data: dict[str, Any]) -> None:
        out.append(
            TraceEvent(run_id=run_id, seq=len(out), kind=kind, ts=float(len(out)), call_id=call_id, data=data)
        )

    for call_id, how, request_id, tool, stages, noise in handlings:
        for i in range(noise):
            add(("model_output", "dispatched", "ledger")[i % 3], None if i % 3 == 0 else call_id, {})
        for stage in stages:
            add(stage, call_id, {"tool": tool})
        if how in ("named", "asked"):
            add("approval_requested", call_id, {"request_id": request_id, "tool": tool})
        if how in ("named", "unnamed"):
            add("observation", call_id, {"status": "error", "category": "needs_approval"})
        elif how == "answered":
            add("dispatched", call_id, {"tool": tool})
            add("observation", call_id, {"status": "ok"})
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    handlings=st.lists(_HANDLING, max_size=8),
    pending=_PENDING,
    asked=st.lists(st.sampled_from((*_CALLS, "c3")), min_size=1, max_size=2),
    before_now=st.booleans(),
)
def test_the_marks_rebuilt_are_those_the_whole_trace_gives(
    store: TraceStore,
    handlings: list[tuple[str, str, str, str, list[str], int]],
    pending: list[tuple[str, str, list[str]]],
    asked: list[str],
    before_now: bool,
) -> None:
    run = f"run-{next(_runs)}"
    events = _trace(run, handlings)
    if events:
        store.append_many(events)
    assert callable(getattr(store, "call_events", None))  # the read of some calls' events is compared
    made = [_request(request_id, run, tool, found) for request_id, tool, found in pending]
    answers = []
    for trace in (store, _Whole(store)):
        requests = _Requests(made)
        wrote = from_trace(_bridge(trace, requests), made, KEY, "fw", asked, before_now=before_now)
        answers.append((wrote, {r.id: marks(r, KEY) for r in requests.kept.values()}))
    assert answers[0] == answers[1]
