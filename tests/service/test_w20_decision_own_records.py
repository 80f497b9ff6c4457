"""A decision through the service commits its own run's trace records, not everyone's.

The SQLite trace store holds a call's records until the file's writer commits them (the flusher,
shortly after). A read of one run (``events``, ``heads``) must see what this process appended to
that run; it need not commit what other runs appended meanwhile. The approval POST reads its run
three times and appends its ``approval_decided`` event: under write load it used to commit (and
wait for) every run's held records. Here the flusher is held still, so the backlog stays put
until something commits it, and the tests count what the decision committed.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actionspace.ledger import sqlite_writer
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore
from tests.service.apptools import bearer, served

BACKLOG_RUNS = 20
RECORDS_EACH = 9


def _records(n: int, tag: str) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    return [(i, "verified", 1_000.0 + i, None, {"note": f"{tag}-{i}"}) for i in range(n)]


def _stored(path: Path, run_id: str) -> list[str]:
    with SqliteTraceReader(path) as reader:
        return [e.kind for e in reader.events(run_id)]


@pytest.fixture
def still_flusher(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferred writes stay queued until a caller commits them (no background flush): patched
    before the file's writer starts its flusher, which so never wakes."""
    monkeypatch.setattr(sqlite_writer._Flusher, "poke", lambda self: None)


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_a_decision_commits_its_own_run_and_leaves_the_backlog_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, still_flusher: None, action: str
) -> None:
    path = tmp_path / "s.db"
    with served(store=f"sqlite:///{path}") as (client, rt, _world, _signalling, app):
        # Held in this thread: no background run waits on it, so nothing but the decision writes.
        held = rt.call_all(
            [{"name": "send_payment", "arguments": {"to": "acct-1", "amount": 5}}], run_id="r1"
        )
        assert held[0].error is not None and held[0].error.category == "needs_approval"
        request_id = str(held[0].error.details["request_id"])
        resumed: list[str] = []
        monkeypatch.setattr(app.state.runner, "resume", lambda request: resumed.append(request.id))
        trace = rt.trace
        assert isinstance(trace, SqliteTraceStore)
        trace.runs()  # what the run recorded so far is committed: the backlog below is all that waits
        ran: list[str] = []
        writer = sqlite_writer.GroupCommit.open(path, busy_timeout_s=10.0)
        try:
            for n in range(BACKLOG_RUNS):
                trace.append_records(f"busy-{n}", _records(RECORDS_EACH, f"busy-{n}"))
            writer.defer(lambda conn: ran.append(threading.current_thread().name))

            decided = client.post(f"/api/approvals/{request_id}/{action}", headers=bearer("approver-token"))
            assert decided.status_code == 200, decided.text
            assert resumed == ([request_id] if action == "approve" else [])

            # Its own event is committed (another connection reads it) ...
            assert "approval_decided" in _stored(path, "r1")
            # ... and nobody else's record was committed, nor waited for, by the decision.
            assert ran == []
            assert [_stored(path, f"busy-{n}") for n in range(BACKLOG_RUNS)] == [[]] * BACKLOG_RUNS

            trace.runs()  # a read of every run commits the backlog: it was real
            assert len(ran) == 1
            assert all(len(_stored(path, f"busy-{n}")) == RECORDS_EACH for n in range(BACKLOG_RUNS))
        finally:
            writer.close()


def test_a_read_of_one_run_sees_what_was_appended_to_it_and_commits_no_other(
    tmp_path: Path, still_flusher: None
) -> None:
    path = tmp_path / "t.db"
    with SqliteTraceStore(path) as store:
        store.append_records("mine", _records(3, "mine"))
        store.append_records("other", _records(4, "other"))
        assert [e.data["note"] for e in store.events("mine")] == ["mine-0", "mine-1", "mine-2"]
        assert [e.seq for e in store.events("mine")] == [0, 1, 2]
        assert _stored(path, "other") == []
        store.append_records("mine", _records(2, "again"))
        heads = store.heads_many(["mine", "nobody"])
        assert heads == {"mine": [], "nobody": []}  # no head kinds recorded
        assert [e.data["note"] for e in store.events("mine")][3:] == ["again-0", "again-1"]
        assert _stored(path, "other") == []
        assert len(store.events("other")) == 4
        store.append_records("mine", _records(1, "last"))
    # closing commits what is left
    assert _stored(path, "mine")[-1:] == ["verified"] and len(_stored(path, "mine")) == 6


def test_a_read_waits_for_its_runs_records_taken_by_a_commit_still_under_way(
    tmp_path: Path, still_flusher: None
) -> None:
    """Records the writer took but has not committed yet are not in the store's hands any more: a
    read of their run waits for that commit instead of reading without them."""
    path = tmp_path / "u.db"
    with SqliteTraceStore(path) as store:
        writer = sqlite_writer.GroupCommit.open(path, busy_timeout_s=10.0)
        entered, release = threading.Event(), threading.Event()

        def hold(conn: Any) -> None:
            entered.set()
            release.wait(60)

        try:
            store.append_records("mine", _records(5, "mine"))  # defers the store's write first
            writer.defer(hold)  # then this: the flush takes the records, then holds its commit
            flushing = threading.Thread(target=writer.settle)
            flushing.start()
            assert entered.wait(60)
            seen: list[list[int]] = []
            reading = threading.Thread(target=lambda: seen.append([e.seq for e in store.events("mine")]))
            reading.start()
            reading.join(0.3)
            assert seen == []  # it waits: what it would read lacks the records taken
            release.set()
            flushing.join(60)
            reading.join(60)
            assert seen == [[0, 1, 2, 3, 4]]
        finally:
            release.set()
            writer.close()


def test_past_the_bound_on_runs_tracked_a_read_settles_everything_then_reads_one_run_again(
    tmp_path: Path, still_flusher: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs whose rows the writer took are tracked up to a bound; a take past it is not entered,
    and reads commit everything (as every read did before) until a full settle passed it."""
    from actionspace.trace import _sqlite_takes

    monkeypatch.setattr(_sqlite_takes, "KEPT", 2)
    path = tmp_path / "v.db"
    with SqliteTraceStore(path) as store:
        for n in range(3):
            store.append_records(f"taken-{n}", _records(2, f"taken-{n}"))
        store.sync()  # the writer takes three runs' rows at once: more than the bound tracks
        store.append_records("mine", _records(1, "mine"))
        store.append_records("other", _records(1, "other"))
        assert len(store.events("mine")) == 1  # untracked takes: the read settles everything ...
        assert len(_stored(path, "other")) == 1
        store.append_records("mine", _records(1, "again"))
        store.append_records("other", _records(1, "again"))
        assert len(store.events("mine")) == 2  # ... once, then one run's read commits that run only
        assert len(_stored(path, "other")) == 1
        assert [len(store.events(f"taken-{n}")) for n in range(3)] == [2, 2, 2]
