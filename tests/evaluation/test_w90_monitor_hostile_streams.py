"""The monitor over traces no runtime would write: events appended out of order, kinds it does not
know, call ids reused across runs, runs cut short, enormous and deeply nested payloads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from actionspace.evaluation.monitor import MonitorReport, monitor
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore

Event = tuple[str, str | None, dict[str, Any]]


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def _store(runs: dict[str, list[Event]], order: list[int] | None = None) -> MemoryTraceStore:
    store = MemoryTraceStore()
    for run_id, events in runs.items():
        made = [
            TraceEvent(run_id=run_id, seq=seq, kind=kind, ts=1.0 + seq % 3, call_id=call_id, data=data)
            for seq, (kind, call_id, data) in enumerate(events)
        ]
        for at in order or [0]:  # appended in batches, the later seqs first
            store.append_many(made[at:])
            made = made[:at]
        if made:
            store.append_many(made)
    return store


def test_payload_fields_nested_past_the_interpreters_depth_are_read_as_absent() -> None:
    deep = _deep(100_000)
    events: list[Event] = [
        (
            "plan_started",
            None,
            {"nodes": [{"id": "a", "refs": [deep, 10**5000]}, {"id": deep}]},
        ),
        ("plan_started", None, {"nodes": [{"id": "a"}], "edges": [[deep, "a"], [10**5000, "a"]]}),
        ("dispatched", "c1", {"tool": "t", "provenance": {"x": deep}}),
        ("ledger", "c1", {"tool": "t", "key": deep, "from": deep, "to": "unknown_commit"}),
        ("observation", "c1", {"tool": "t", "status": deep, "category": deep}),
        ("ledger", None, {"key": deep, "from": "unknown_commit", "to": deep}),
    ]
    report = monitor(_store({"r": events}))
    health = report.tool("t")
    assert (report.calls, health.calls, health.unknown_commits) == (1, 1, 1)
    assert (health.ok_results, health.failures, health.rejects) == (0, 0, 0)


def test_an_enormous_payload_is_counted_as_any_other() -> None:
    text = "x" * 20_000_000
    errors = [{"path": f"/items/{i}", "message": text[:10]} for i in range(100_000)]
    events: list[Event] = [
        ("model_output", None, {"raw": text}),
        ("validated", "c1", {"tool": "t", "verdict": "rejected", "field_errors": [*errors, *errors]}),
        ("observation", "c1", {"tool": "t", "status": "error", "category": "invalid_arguments", "x": text}),
    ]
    health = monitor(_store({"r": events})).tool("t")
    assert (health.calls, health.rejects) == (1, 1)
    assert len(health.rejects_by_field) == 100_000 and set(health.rejects_by_field.values()) == {1}


@pytest.mark.parametrize(
    ("events", "figures"),
    [
        pytest.param(
            [
                ("validated", "c1", {"tool": "t", "verdict": "rejected"}),
                ("observation", "c1", {"status": "ok"}),
            ],
            (0, 0, 1),
            id="rejected by validation, yet answered ok",
        ),
        pytest.param(
            [
                ("observation", "c1", {"tool": "t", "status": "error", "category": "permission_denied"}),
                ("observation", "c1", {"tool": "t", "status": "ok"}),
            ],
            (0, 0, 1),
            id="refused, then answered ok",
        ),
        pytest.param(
            [
                ("resolved", "c1", {"tool": "t", "category": "unknown_tool"}),
                ("dispatched", "c1", {}),
                ("observation", "c1", {"status": "error", "category": "transient"}),
            ],
            (0, 1, 0),
            id="unresolved, yet sent, and failed",
        ),
    ],
)
def test_a_call_a_stage_rejected_and_yet_sent_or_answered_ok_is_read_by_its_last_observation(
    events: list[Event], figures: tuple[int, int, int]
) -> None:
    health = monitor(_store({"r": events})).tool("t")
    assert (health.rejects, health.failures, health.ok_results) == figures
    assert health.rejects_by_field == {}


_IDS = st.sampled_from(("c1", "c2", "r0:g", "r1:g", None))
_DATA = st.fixed_dictionaries(
    {},
    optional={
        "tool": st.sampled_from(("t", "u", 7, None)),
        "status": st.sampled_from(("ok", "error", "pending", 1, None)),
        "category": st.sampled_from(
            ("transient", "unknown_commit", "needs_approval", "permission_denied", 3)
        ),
        "verdict": st.sampled_from(("rejected", "accepted", None)),
        "field_errors": st.sampled_from(([{"path": "/a"}], [{"path": 5}], "x", None)),
        "replayed": st.booleans(),
        "content_hash": st.sampled_from(("h", "k", None)),
        "key": st.sampled_from(("k", "j", 4)),
        "from": st.sampled_from(("unknown_commit", "pending")),
        "to": st.sampled_from(("unknown_commit", "committed")),
        "group": st.sampled_from(("g", 2)),
        "provenance": st.sampled_from(
            ({"x": "tool_result:c1"}, {"x": [{"source": "tool_result(c2, /a)"}]}, 3)
        ),
        "nodes": st.sampled_from(([{"id": "c1"}, {"id": "c2", "refs": ["c1"]}], [{"id": 1}], 5)),
        "edges": st.sampled_from(([["c1", "c2"]], [[1, 2]], [["c1"]])),
    },
)
_KIND = st.sampled_from(
    (
        "resolved",
        "validated",
        "proposed",
        "authorized",
        "dispatched",
        "observation",
        "verified",
        "ledger",
        "plan_started",
        "approval_requested",
        "no_such_kind",
        "",
    )
)
_RUN = st.lists(st.tuples(_KIND, _IDS, _DATA), max_size=16)


def _one_outcome_each(report: MonitorReport) -> None:
    assert report.calls == sum(t.calls for t in report.tools)
    for h in report.tools:
        # a call ends one way: rejected before dispatch, failed, undecided, ok or answered by a replay
        assert h.rejects + h.failures + h.undecided + h.ok_results + h.replays <= h.calls, h
        assert h.used_results <= h.ok_results and h.consumers_ok <= h.consumers
        assert h.unknown_commits <= h.calls
        assert all(isinstance(k, str) for k in (*h.rejects_by_category, *h.failures_by_category))
    json.dumps(report.to_dict(), allow_nan=False)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs=st.lists(_RUN, min_size=1, max_size=3), order=st.lists(st.integers(0, 16), max_size=3))
@example(  # rejected by validation, yet answered ok
    runs=[
        [("validated", "c1", {"tool": "t", "verdict": "rejected"}), ("observation", "c1", {"status": "ok"})]
    ],
    order=[],
)
@example(  # refused, then answered ok
    runs=[
        [
            ("observation", "c1", {"tool": "t", "status": "error", "category": "permission_denied"}),
            ("observation", "c1", {"tool": "t", "status": "ok"}),
        ]
    ],
    order=[1],
)
@example(  # unresolved, yet sent, and failed
    runs=[
        [
            ("resolved", "c1", {"tool": "t", "category": "unknown_tool"}),
            ("dispatched", "c1", {}),
            ("observation", "c1", {"status": "error", "category": "transient"}),
        ]
    ],
    order=[],
)
def test_any_stream_of_any_runs_gives_each_call_at_most_one_outcome(
    runs: list[list[Event]], order: list[int]
) -> None:
    stored = {f"r{i}": events for i, events in enumerate(runs)}
    report = monitor(_store(stored, sorted(order, reverse=True)))
    _one_outcome_each(report)
    # the order the events were appended in changes nothing: they are read by seq
    assert report.to_dict() == monitor(_store(stored)).to_dict()
    # a run cut short is read as far as it goes
    for cut in (1, len(runs[0]) // 2):
        _one_outcome_each(monitor(_store({"r0": runs[0][:cut]})))
