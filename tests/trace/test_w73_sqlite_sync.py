"""``SqliteTraceStore.sync`` commits the records appended before it at once: another connection
(another process) reads them as soon as it returns, with no linger; a closed store refuses."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.trace.sqlite import SqliteTraceStore


def _stored(path: Path, run_id: str) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as db:
        return db.execute(
            "SELECT seq, kind FROM trace_events WHERE run_id = ? ORDER BY seq", (run_id,)
        ).fetchall()


def test_sync_commits_what_was_appended_before_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 60.0)  # the flusher would wait a minute
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        now = time.time()
        store.append_records("r", [(0, "proposed", now, "c1", {"tool": "pay"})])
        store.append_records("r", [(1, "approval_requested", now, "c1", {"request_id": "q"})])
        store.sync()
        assert _stored(path, "r") == [(0, "proposed"), (1, "approval_requested")]
        store.append_records("r", [(2, "observation", now, "c1", {"status": "error"})])
        store.sync()
        assert [kind for _, kind in _stored(path, "r")] == ["proposed", "approval_requested", "observation"]
        store.sync()  # nothing held: nothing written, nothing raised
        assert len(_stored(path, "r")) == 3


def test_a_closed_store_refuses_to_sync(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.sync()
