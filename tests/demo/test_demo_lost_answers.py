"""The calendar scenario's lost answers stay lost: what the demo reports is what the ledger keeps."""

from __future__ import annotations

import functools
import logging
import threading
from concurrent.futures import Future
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.demo.scenario import run_demo
from actionspace.ledger import late

DEADLINE_S = 10.0


def _attempts_left_running(monkeypatch: pytest.MonkeyPatch) -> list[Future[Any]]:
    """Every send that outlived its caller during the run (a lost answer's worker thread)."""
    held: list[Future[Any]] = []
    hold = late.hold

    def recording(key: str, running: Future[Any]) -> None:
        held.append(running)
        hold(key, running)

    monkeypatch.setattr(late, "hold", recording)
    return held


def _wait_until_ended(futures: list[Future[Any]]) -> None:
    """Until every late attempt ended and the runtime's own callbacks on it ran (ours run after)."""
    for future in futures:
        ended = threading.Event()
        future.add_done_callback(functools.partial(_set, ended))
        assert ended.wait(DEADLINE_S), "a late attempt of the demo never ended"


def _set(event: threading.Event, _: Future[Any]) -> None:
    event.set()


def test_the_unknown_commit_the_demo_reports_is_still_there_after_the_lost_answer_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    held = _attempts_left_running(monkeypatch)
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    with caplog.at_level(logging.WARNING, logger="actionspace"):
        report = run_demo(tmp_path / "calendar", store=store, today=date(2026, 12, 1))
        _wait_until_ended(held)
    assert report.verified and len(report.unknown_commits) == 1
    assert held, "the scenario's lost answers leave their sends running"
    assert not [r for r in caplog.records if "late outcome" in r.getMessage()]
    rt = Runtime(store, recover_on_start=False)
    try:
        (key,) = report.unknown_commits
        entry = rt.ledger.get(key)
        assert entry is not None and entry.state == "unknown_commit"
    finally:
        rt.close()
