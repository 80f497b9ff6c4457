"""A run's revision, read before each call on a SQLite file, is read on the file's writer and kept.

Every call of a run continued on a shared store first reads the revision of the run's stored
snapshot: it is how a process sees the newer snapshot another process saved (a secret its model
read there). That read ran on the calling thread's reading connection, whose page cache each
commit of the process's writer drops, so it started cold after every call. It now runs on the
writing connection while no group holds it, and is answered from memory while the writer's
``PRAGMA data_version`` shows that no other connection committed to the file and no write of this
process changed the run's snapshot. These tests hold both halves: the read is gone from the calls'
statements, and a newer snapshot written by another process, by another runtime of this process,
or while the writer is busy is still seen by the very next call.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Labels, Runtime
from actionspace.discovery.runs import join_call_ids
from actionspace.ledger import sqlite_writer
from actionspace.ledger.run_state import SqliteRunStateStore
from actionspace.ledger.sqlite_writer import GroupCommit
from tests.proc import run_child

_REV_READ = "FROM run_state WHERE run_id"  # the revision read's statement (and load's)

_RAISE_LABEL = textwrap.dedent(
    """
    import json, sys
    from actionspace import Labels, Runtime

    rt = Runtime(sys.argv[1], recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2"

    obs = rt.call({"name": "read_password", "arguments": {}}, run_id=sys.argv[2])
    rt.close()
    print(json.dumps({"ok": obs.ok}))
    """
)


def _runtime(url: str, sent: list[str]) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return "hunter2"

    return rt


def _send(rt: Runtime, run: str, i: int) -> Any:
    email = {"recipient": "eve@example.com", "body": f"note {i}"}
    return rt.call({"name": "send_email", "arguments": email}, run_id=run, node_id=f"send-{i}")


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every statement run on any SQLite connection opened from here on."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    yield seen


def test_calls_of_a_run_no_other_connection_writes_read_no_revision_row(
    tmp_path: Path, statements: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The flusher waits: no deferred commit holds the writer when a call reads (it would read on
    # its own connection then, as it must while the writer is held: see the test of that).
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)
    sent: list[str] = []
    rt = _runtime(f"sqlite:///{tmp_path / 'a.db'}", sent)
    try:
        run = rt.new_run()
        for i in range(40):  # past the call ids a label keeps: the run's snapshot stops changing
            assert _send(rt, run, i).ok
        del statements[:]
        for i in range(40, 60):
            assert _send(rt, run, i).ok
        reads = [s for s in statements if _REV_READ in s]
        assert reads == []  # the code before: one per call, on the reading connection
        assert len(sent) == 60
    finally:
        rt.close()


def test_a_snapshot_another_process_saved_between_two_calls_is_seen_by_the_second(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    sent: list[str] = []
    rt = _runtime(url, sent)
    try:
        run = rt.new_run()
        for i in range(40):  # the revision is kept in memory by now (see the first test)
            assert _send(rt, run, i).ok
        assert run_child(_RAISE_LABEL, url, run) == {"ok": True}  # its model read a secret there
        denied = _send(rt, run, 40)
        assert denied.error is not None and denied.error.category == "policy_violation"
        assert sent == [f"note {i}" for i in range(40)]
    finally:
        rt.close()


def test_a_snapshot_another_runtime_of_this_process_saved_is_seen_by_the_next_call(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'a.db'}"
    sent: list[str] = []
    first, second = _runtime(url, sent), _runtime(url, sent)  # one writer: no data_version moves
    try:
        run = first.new_run()
        for i in range(40):
            assert _send(first, run, i).ok
        assert second.call({"name": "read_password", "arguments": {}}, run_id=run).ok
        denied = _send(first, run, 40)
        assert denied.error is not None and denied.error.category == "policy_violation"
        assert len(sent) == 40
    finally:
        first.close()
        second.close()


def test_a_revision_read_while_the_writer_is_held_reads_elsewhere_without_waiting(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    store = SqliteRunStateStore(path)
    other = sqlite3.connect(path, isolation_level=None)  # another process's writes, as SQLite sees them
    group = GroupCommit.open(path, busy_timeout_s=10.0)
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        assert release.wait(60)

    holder = threading.Thread(target=group.run, args=(hold,), kwargs={"durable": False})
    try:
        assert store.save("r", {"v": 1, "turn": 1, "rev": 1})
        assert store.rev("r") == 1 and store.rev("r") == 1  # read on the writer, then kept
        other.execute("UPDATE run_state SET state = ? WHERE run_id = 'r'", (json.dumps({"v": 1, "rev": 2}),))
        assert store.rev("r") == 2  # another connection committed: read again
        assert store.rev("nobody") is None
        other.execute("UPDATE run_state SET state = ? WHERE run_id = 'r'", (json.dumps({"v": 1, "rev": 3}),))
        holder.start()
        assert entered.wait(60)
        # the writer is held by a group: a reading connection answers, never the revision kept
        assert store.rev("r") == 3 and store.rev("nobody") is None
    finally:
        release.set()
        holder.join(60)
        other.close()
        group.close()
        store.close()
    assert not holder.is_alive()


def test_a_snapshot_saved_through_the_same_writer_is_not_answered_from_memory(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    first, second = SqliteRunStateStore(path), SqliteRunStateStore(path)  # one writer in this process
    try:
        assert first.rev("r") is None and first.rev("r") is None
        assert second.save("r", {"v": 1, "turn": 1, "rev": 1})
        assert first.rev("r") == 1 and first.rev("r") == 1
        assert second.save("r", {"v": 1, "turn": 2, "rev": 2}, [(1, "hello")])
        assert first.rev("r") == 2
        second.save_later("r", {"v": 1, "turn": 3})  # no revision: written over any
        second.load("r")  # commits what was saved later
        assert first.rev("r") == 0 == second.rev("r")
        second.save_later("r", {"v": 1, "turn": 3, "rev": 0, "x": 1}, join=join_call_ids)
        assert first.rev("r") == 0 and first.load("r") is not None
    finally:
        first.close()
        second.close()
