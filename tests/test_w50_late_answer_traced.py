"""A timed-out write whose late answer settles its ledger entry after the caller got
``unknown_commit`` — while the runtime is open, or during ``close(wait=True)`` — leaves that
settlement in the trace, so the trace and monitoring stop showing the call ``unknown_commit``."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor
from actionspace.trace.events import TraceEvent, TraceStore

WAIT_S = 10.0


class Slow:
    """A write tool that answers only once released (after its timeout)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ended = threading.Event()

    def pay(self, cents: int) -> str:
        """Pay."""
        assert self.release.wait(WAIT_S)
        self.ended.set()
        return f"paid {cents}"


def _runtime(url: str, slow: Slow) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    rt.add_tool(
        name="pay",
        input_schema={"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]},
        fn=slow.pay,
        effect="write",
        timeout_s=0.05,
    )
    return rt


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'late.db'}"


def _timed_out(rt: Runtime) -> tuple[str, str]:
    run_id = rt.new_run()
    obs = rt.call({"name": "pay", "arguments": {"cents": 5}}, run_id=run_id)
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    [entry] = rt.ledger.list()
    assert entry.state == "unknown_commit"
    return run_id, entry.key


def _assert_settlement_traced(store: TraceStore, run_id: str, key: str) -> None:
    events = store.events(run_id)
    late = [e for e in events if e.kind == "ledger" and e.data.get("by") == "late_answer"]
    assert len(late) == 1, [e.data for e in events if e.kind == "ledger"]
    [event] = late
    assert event.data["key"] == key
    assert (event.data["from"], event.data["to"]) == ("unknown_commit", "committed")
    assert event.call_id == _call_id(events)  # the call's own id: monitoring settles that call
    [pay] = monitor(store, run_ids=[run_id]).tools
    assert pay.unknown_commits == 0, pay


def _assert_traced_after_close(rt: Runtime, url: str, run_id: str, key: str) -> None:
    if url.startswith("memory"):
        _assert_settlement_traced(rt.trace, run_id, key)
        return
    with Runtime(url, recover_on_start=False) as again:  # the closed store's file, read anew
        _assert_settlement_traced(again.trace, run_id, key)


def _call_id(events: list[TraceEvent]) -> str | None:
    [observation] = [e for e in events if e.kind == "observation"]
    return observation.call_id


def test_a_late_answer_arriving_during_close_wait_is_in_the_trace(url: str) -> None:
    slow = Slow()
    rt = _runtime(url, slow)
    run_id, key = _timed_out(rt)
    threading.Timer(0.1, slow.release.set).start()
    rt.close(wait=True)  # waits for the timed-out send, whose answer settles the entry
    assert slow.ended.is_set()
    _assert_traced_after_close(rt, url, run_id, key)


def test_a_late_answer_arriving_while_the_runtime_is_open_is_in_the_trace() -> None:
    slow = Slow()
    rt = _runtime("memory://", slow)
    run_id, key = _timed_out(rt)
    settled = threading.Event()
    slow.release.set()
    for _ in range(1000):
        if rt.ledger.get(key).state == "committed":  # type: ignore[union-attr]
            settled.set()
            break
        settled.wait(0.01)
    assert settled.is_set()
    _assert_settlement_traced(rt.trace, run_id, key)
    rt.close()


def test_a_late_answer_after_the_trace_store_closed_settles_the_entry_and_raises_nowhere(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = Slow()
    rt = _runtime("memory://", slow)
    _run_id, key = _timed_out(rt)

    def closed(*_args: Any, **_kwargs: Any) -> None:
        raise ValueError("the trace store is closed")

    for name in ("append_records", "append_many", "append_call", "append_nodes"):
        if hasattr(rt.trace, name):
            setattr(rt.trace, name, closed)
    caplog.set_level(logging.ERROR)
    threading.Timer(0.1, slow.release.set).start()
    rt.close(wait=True)
    assert slow.ended.is_set()
    entry = rt.ledger.get(key)
    assert entry is not None and entry.state == "committed"
    assert entry.observation is not None and entry.observation["diagnostics"]["resolved_by"] == "late_answer"
    assert not any("exception calling callback" in r.getMessage() for r in caplog.records)
