"""Durable writes on SQLite: what reaches the disk before a tool runs, what only reaches the WAL.

Each SQLite connection the stores open is watched through its statement trace: a ``COMMIT`` at
``synchronous=FULL`` waits for the disk (an fsync of the WAL), one at ``NORMAL`` only for the WAL
write (it survives the process, not the machine) unless the same thread then syncs the file's WAL
(``os.fdatasync`` of a descriptor of the ``-wal`` file, as the file's writer does after a durable
commit) before its next statement. A write statement run outside a transaction (the writer runs a
lone transition so, with no ``BEGIN`` and ``COMMIT`` around it) is a transaction of its own,
committed when it ends. The tables a transaction wrote are recorded with it, so ledger, trace and
run-state commits can be told apart.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite import GroupCommit, SqliteConnections, SqliteLedgerStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.ledger import durable_workers
from tests.ledger.factories import entry

DEADLINE_S = 60.0
_WRITES = ("INSERT INTO ", "INSERT OR IGNORE INTO ", "UPDATE ", "DELETE FROM ")


@dataclass
class Commit:
    durable: bool
    tables: frozenset[str]


@dataclass
class Commits:
    """Every transaction committed on a watched connection, in order."""

    done: list[Commit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    last: dict[int, Commit] = field(default_factory=dict)
    """Each thread's commit just made, until its next statement: what a sync of the WAL makes
    durable."""

    def synced_wal(self) -> None:
        commit = self.last.pop(threading.get_ident(), None)
        if commit is not None:
            commit.durable = True

    def watch(self, conn: sqlite3.Connection) -> None:
        level = ["FULL"]  # SQLite's default until a pragma says otherwise
        tables: set[str] = set()
        open_ = [False]
        previous: list[str | None] = [None]
        """A transaction of ours is open on the connection (between a ``BEGIN`` and its end)."""

        def committed() -> None:
            commit = Commit(level[0] in ("FULL", "2", "EXTRA", "3"), frozenset(tables))
            with self.lock:
                self.done.append(commit)
            self.last[threading.get_ident()] = commit
            tables.clear()

        def seen(statement: str) -> None:
            text = " ".join(statement.split()).upper()
            if text == previous[0] and text.startswith(_WRITES):
                return  # a trigger the statement fires, traced with the statement's own text
            previous[0] = text
            self.last.pop(threading.get_ident(), None)
            if text.startswith("PRAGMA SYNCHRONOUS ="):
                level[0] = text.rsplit("=", 1)[1].strip()
            elif text.startswith("BEGIN"):
                open_[0] = True
            elif text.startswith(_WRITES):
                head = text.split("(")[0].split()
                tables.add(
                    head[1]
                    if head[0] == "UPDATE"
                    else head[head.index("FROM" if "FROM" in head else "INTO") + 1]
                )
                if not open_[0]:  # a statement of its own: committed when it ends
                    committed()
            elif text == "COMMIT":
                open_[0] = False
                committed()
            elif text.startswith("ROLLBACK") and "TO" not in text:
                open_[0] = False
                tables.clear()

        conn.set_trace_callback(seen)

    def since(self, start: int) -> list[Commit]:
        with self.lock:
            return list(self.done[start:])

    def __len__(self) -> int:
        with self.lock:
            return len(self.done)


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Commits]:
    watched = Commits()
    connect = sqlite3.connect

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        watched.watch(conn)
        return conn

    fdatasync = os.fdatasync

    def syncing(fd: int) -> None:
        fdatasync(fd)
        if os.readlink(f"/proc/self/fd/{fd}").endswith("-wal"):
            watched.synced_wal()

    monkeypatch.setattr(sqlite3, "connect", watching)
    monkeypatch.setattr(os, "fdatasync", syncing)
    yield watched


def _state(path: Path, node_id: str) -> str | None:
    """The ledger state of ``node_id`` as another connection sees it."""
    conn = sqlite3.connect(path)
    try:
        sql = "SELECT state FROM ledger_entries WHERE node_id = ?"
        row = conn.execute(sql, (node_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _put_runtime(path: Path, at_tool: dict[str, Any], commits: Commits) -> Runtime:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        at_tool["commits"] = len(commits)
        at_tool["state"] = _state(path, key)
        return value

    properties = {"key": {"type": "string"}, "value": {"type": "integer"}}
    schema = {"type": "object", "properties": properties}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    return rt


def test_a_write_call_fsyncs_its_intent_once_before_the_tool_and_nothing_of_the_ledger_after(
    tmp_path: Path, commits: Commits
) -> None:
    path = tmp_path / "a.db"
    at_tool: dict[str, Any] = {}
    rt = _put_runtime(path, at_tool, commits)
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "w", "value": 0}), run_id=run, node_id="w")
    start = len(commits)

    call = ToolCall(name="put", arguments={"key": "n1", "value": 7})
    obs = rt.call(call, run_id=run, node_id="n1")

    assert (obs.status, obs.data) == ("ok", 7)
    assert at_tool["state"] == "dispatched"  # on disk before the tool ran
    until_tool = commits.since(start)[: at_tool["commits"] - start]
    before = [c for c in until_tool if "LEDGER_ENTRIES" in c.tables]
    after = commits.since(at_tool["commits"])
    assert [c.durable for c in before] == [True]
    # (the trace is deferred: it may ride along any later transaction, a durable one included)
    assert not [c for c in after if c.durable and "LEDGER_ENTRIES" in c.tables]
    assert [c.durable for c in after if "LEDGER_ENTRIES" in c.tables] == [False]
    assert _state(path, "n1") == "committed"  # in the WAL when the call returned
    rt.close()


def test_an_operation_that_need_not_wait_for_the_disk_commits_without_fsync(
    tmp_path: Path, commits: Commits
) -> None:
    db = SqliteConnections(tmp_path / "g.db", synchronous="FULL", busy_timeout_s=10.0)
    schema = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)"
    db.init_schema(schema, "meta", "v", 1)
    group = GroupCommit(db)
    start = len(commits)

    group.run(lambda conn: conn.execute("INSERT INTO meta VALUES ('a', '1')"), durable=False)
    group.run(lambda conn: conn.execute("INSERT INTO meta VALUES ('b', '2')"))
    group.run(lambda conn: conn.execute("INSERT INTO meta VALUES ('c', '3')"), durable=False)

    group.run(lambda conn: conn.execute("INSERT INTO meta VALUES ('d', '4')"))

    assert [c.durable for c in commits.since(start)] == [False, True, False, True]
    db.close()


def test_a_trace_append_queued_behind_a_ledger_write_is_not_added_to_its_transaction(
    tmp_path: Path, commits: Commits
) -> None:
    path = tmp_path / "a.db"
    ledger, trace = SqliteLedgerStore(path), SqliteTraceStore(path)
    writer = GroupCommit.open(path, busy_timeout_s=10.0)
    entered, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        assert release.wait(DEADLINE_S)

    holder = threading.Thread(target=writer.run, args=(hold,))
    holder.start()
    assert entered.wait(DEADLINE_S)
    start = len(commits)
    record = (0, "ledger", time.time(), "c1", {"to": "accepted"})
    trace.append_records("r1", [record])  # returns at once: deferred
    begin = threading.Thread(target=ledger.begin, args=(entry("n1"),))
    begin.start()
    deadline = time.monotonic() + DEADLINE_S
    while writer.queued < 2:  # both wait behind the held transaction
        assert time.monotonic() < deadline, "the writes never queued on the file's writer"
        time.sleep(0.001)
    release.set()
    for t in (holder, begin):
        t.join(DEADLINE_S)

    # the intent's fsync'd transaction carries the intent only; the trace follows on its own
    assert [c.durable for c in commits.since(start)[1:2]] == [True]
    assert sorted(commits.since(start)[1].tables) == ["LEDGER_ENTRIES"]
    assert ledger.get_node("r1", "n1") == entry("n1")
    assert [e.kind for e in trace.events("r1")] == ["ledger"]
    writer.close()
    ledger.close()
    trace.close()


def test_calls_do_not_wait_for_their_trace_and_the_flusher_writes_several_at_once(
    tmp_path: Path, commits: Commits, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 0.5, raising=False)  # tells the two apart
    path = tmp_path / "a.db"
    at_tool: dict[str, Any] = {}
    rt = _put_runtime(path, at_tool, commits)
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "w", "value": 0}), run_id=run, node_id="w")
    assert rt.trace.events(run)  # a read commits what is deferred: the first call's trace
    start = len(commits)

    for i in range(3):
        call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
        assert rt.call(call, run_id=run, node_id=f"k{i}").status == "ok"
    on_the_calls = commits.since(start)
    deadline = time.monotonic() + DEADLINE_S
    while not any("TRACE_EVENTS" in c.tables for c in commits.since(start)):
        assert time.monotonic() < deadline, "the deferred trace was never written"
        time.sleep(0.01)
    later = commits.since(start + len(on_the_calls))

    # three intents and three outcomes, nothing of the trace while the calls ran ...
    assert [c.durable for c in on_the_calls if "LEDGER_ENTRIES" in c.tables] == [True, False] * 3
    assert not [c for c in on_the_calls if c.tables & {"TRACE_EVENTS", "TRACE_RUNS"}]
    # ... then the three calls' events in one transaction, without an fsync of its own
    trace_commits = [c for c in later if "TRACE_EVENTS" in c.tables]
    assert len(trace_commits) == 1 and not trace_commits[0].durable
    events = rt.trace.events(run)
    assert {e.call_id for e in events if e.kind == "observation"} >= {f"{run}:k{i}" for i in range(3)}
    rt.close()


def test_the_deferred_trace_of_a_process_that_exits_without_closing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    code = (
        "import sys\n"
        "from actionspace import Runtime, ToolCall\n"
        "from actionspace.ledger import sqlite_writer\n"
        "sqlite_writer.LINGER_S = 60.0\n"
        f"rt = Runtime('sqlite:///{path}')\n"
        "@rt.tool(effect='write')\n"
        "def put(key: str) -> str:\n"
        "    return key\n"
        "run = rt.new_run()\n"
        "rt.call(ToolCall(name='put', arguments={'key': 'x'}), run_id=run, node_id='n1')\n"
        "print(run)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=DEADLINE_S)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    with SqliteTraceStore(path) as trace:
        kinds = [e.kind for e in trace.events(run_id)]
    assert "observation" in kinds and "dispatched" in kinds


def test_stores_of_one_file_share_its_writer_until_the_last_closes(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    ledger = SqliteLedgerStore(path)
    trace = SqliteTraceStore(path)
    ledger.close()
    with pytest.raises(ValueError, match="closed"):
        ledger.begin(entry("n1"))
    trace.append_records("r1", [(0, "x", time.time(), None, {})])  # the writer outlives the ledger
    assert [e.kind for e in trace.events("r1")] == ["x"]
    trace.close()
    with SqliteLedgerStore(path) as reopened:  # a new writer once every store had closed
        assert reopened.begin(entry("n1")).created


def test_an_outcome_not_waited_for_on_disk_survives_the_process_being_killed(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "a.db")
    ctx = multiprocessing.get_context("spawn")
    returned = ctx.Event()
    child = ctx.Process(target=durable_workers.call_then_hang, args=(path, returned))
    child.start()
    try:
        assert returned.wait(DEADLINE_S), "the child's call never returned"
    finally:
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(DEADLINE_S)
    assert child.exitcode == -signal.SIGKILL
    with SqliteLedgerStore(path) as store:
        stored = store.get_node("r-killed", "n1")
    assert stored is not None and stored.state == "committed"
    assert stored.observation is not None and stored.observation["data"] == {"k": 1}


def test_a_trace_append_does_not_wait_behind_a_busy_writer_and_reads_see_it(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    trace = SqliteTraceStore(path)
    writer = GroupCommit.open(path, busy_timeout_s=10.0)
    entered, release, appended = threading.Event(), threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        entered.set()
        assert release.wait(DEADLINE_S)

    def append() -> None:
        trace.append_records("r1", [(0, "observation", time.time(), "c1", {"status": "ok"})])
        appended.set()

    holder = threading.Thread(target=writer.run, args=(hold,))
    holder.start()
    assert entered.wait(DEADLINE_S)
    threading.Thread(target=append).start()
    assert appended.wait(DEADLINE_S)  # returned while the writer was still held
    assert not release.is_set() and writer.queued == 1
    read: list[list[str]] = []
    reader = threading.Thread(target=lambda: read.append([e.kind for e in trace.events("r1")]))
    reader.start()
    deadline = time.monotonic() + DEADLINE_S
    while reader.is_alive() and writer.queued < 2:  # the read queues behind the append
        assert time.monotonic() < deadline, "the read neither returned nor queued"
        time.sleep(0.001)
    release.set()
    reader.join(DEADLINE_S)
    holder.join(DEADLINE_S)
    assert read == [["observation"]]  # the read waited for the queued append
    writer.close()
    trace.close()


def test_a_call_that_adds_only_its_id_behind_the_run_label_does_not_wait_for_the_run_state(
    tmp_path: Path, commits: Commits
) -> None:
    path = tmp_path / "a.db"
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    @rt.tool(effect="read")  # an internal result: the first one raises the run label
    def look(q: str) -> str:
        return q

    run = rt.new_run()
    start = len(commits)
    rt.call(ToolCall(name="look", arguments={"q": "a"}), run_id=run)
    raised = [c for c in commits.since(start) if "RUN_STATE" in c.tables]
    assert [c.durable for c in raised] == [True]  # the new label is on disk before the answer

    start = len(commits)
    for q in "bcd":
        rt.call(ToolCall(name="look", arguments={"q": q}), run_id=run)
    assert not [c for c in commits.since(start) if "RUN_STATE" in c.tables and c.durable]
    assert rt.trace.runs()  # a read of every run commits what is deferred (one run's, that run's records)
    later = [c for c in commits.since(start) if "RUN_STATE" in c.tables]
    assert later and not any(c.durable for c in later)

    with Runtime(f"sqlite:///{path}", recover_on_start=False) as other:  # another process's view
        flow = other.engine.run(run).flow
        assert flow.context == rt.engine.run(run).flow.context
        assert {source for source, _ in flow.origins()} == {f"{run}:n{i}" for i in range(1, 5)}
    rt.close()
