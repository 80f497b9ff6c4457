"""A group's leader interrupted at every call and return of the writer's code it runs, one at a time.

A signal handler runs in the main thread as a call begins or returns. Here the leader's thread
raises the interruption at its ``n``-th such event in the writer's modules (``actionspace/ledger``),
for every ``n`` until its call runs through with none left: as it queues, waits, takes the group,
begins, runs the operations, commits, syncs and hands the writer on. Whatever ``n``, for the user:
nobody waits for ever; the other caller of the group is answered with its result exactly when its
row is in the file, and otherwise fails with an ``Exception`` of its own (never the leader's
interruption); the leader's caller raises the interruption; no transaction is left open; a later
write goes through.
"""

from __future__ import annotations

import gc
import sqlite3
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections

DEADLINE_S = 10.0
LEDGER = str(Path(sqlite_writer.__file__).parent)
MOST = 400
"""More events than the leader's call runs: the sweep ends before (asserted)."""


class Interrupted(BaseException):
    """What a signal handler raises in the leader's thread."""


def _writer(path: Path) -> GroupCommit:
    db = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    group = GroupCommit(db)
    group.run(lambda conn: None)
    return group


def _rows(path: Path) -> set[str]:
    other = sqlite3.connect(path)
    try:
        return {row[0] for row in other.execute("SELECT k FROM t")}
    finally:
        other.close()


def _insert(key: str) -> Callable[[sqlite3.Connection], str]:
    def op(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES (?)", (key,))
        return key

    return op


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.0005)


def _interrupted_at(nth: int) -> Callable[[FrameType, str, Any], Any]:
    """A trace function raising :class:`Interrupted` at the ``nth`` call or return of a frame of the
    writer's modules, then tracing nothing more."""
    seen = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            return fire()
        return local

    def fire() -> Any:
        seen[0] += 1
        if seen[0] == nth:
            sys.settrace(None)
            raise Interrupted
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(LEDGER):
            return fire()
        return None

    return tracer


def _one(path: Path, nth: int, durable: bool) -> tuple[bool, dict[str, Any]]:
    """The leader ``b`` of a group of ``b`` and ``c`` interrupted at its ``nth`` event: whether it
    was, and what each caller got."""
    group = _writer(path)
    out: dict[str, Any] = {}
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES ('a')")
        started.set()
        release.wait(DEADLINE_S)
        return "a"

    def call(name: str, traced: bool) -> None:
        if traced:
            sys.settrace(_interrupted_at(nth))
        try:
            out[name] = group.run(_insert(name), durable=durable)
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc
        finally:
            sys.settrace(None)

    a = threading.Thread(target=lambda: out.__setitem__("a", group.run(hold)), daemon=True)
    a.start()
    assert started.wait(DEADLINE_S)
    b = threading.Thread(target=call, args=("b", True), daemon=True)
    b.start()
    _until(lambda: group.queued == 1 or "b" in out, "b to queue")
    c = threading.Thread(target=call, args=("c", False), daemon=True)
    c.start()
    _until(lambda: group.queued >= 1 + ("b" not in out), "c to queue")
    release.set()
    for thread in (a, b, c):
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), f"at event {nth}: {thread.name} waits for ever"
    rows = _rows(path)
    c_got = out.get("c")
    assert c_got == "c" or isinstance(c_got, Exception), f"at event {nth}: c got {c_got!r}"
    assert (c_got == "c") == ("c" in rows), f"at event {nth}: c got {c_got!r}, rows {rows}"
    b_got = out.get("b")
    assert b_got == "b" or isinstance(b_got, Interrupted), f"at event {nth}: b got {b_got!r}"
    if b_got == "b":
        assert "b" in rows
    assert group.run(_insert("d")) == "d", f"at event {nth}: a later write failed"
    assert group.queued == 0
    wal = group._wal
    assert wal is not None and not wal[0].in_transaction
    group.close()
    group._db.close()
    return isinstance(b_got, Interrupted), out


def test_a_leader_interrupted_at_any_call_or_return_leaves_every_caller_answered_truly(
    tmp_path: Path,
) -> None:
    for durable in (True, False):
        fired = 0
        for nth in range(1, MOST):
            gc.collect()  # the writers of the steps before are closed here, not by a finalizer the
            gc.disable()  # collector would run in the leader's thread (its events counted there)
            try:
                interrupted, _ = _one(tmp_path / f"w{int(durable)}-{nth}.db", nth, durable)
            finally:
                gc.enable()
            if not interrupted:
                break
            fired += 1
        else:
            raise AssertionError(f"the leader's call ran more than {MOST} events")
        assert fired > 20  # the sweep went through the leader's steps, not only its first call
