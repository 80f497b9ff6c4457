"""Opcodes and Python calls the SQLite writer's steps execute in ``actionspace/ledger``'s modules,
counted with ``sys.settrace`` on the code ``PYTHONPATH`` names (load-independent, so the code before
and the code in use are counted in a process each):

    git archive HEAD src | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old/src python scripts/writer_step_counts.py
    PYTHONPATH=src python scripts/writer_step_counts.py

Steps: a lone caller's durable ``GroupCommit.run`` (with and without ``autocommit``), the leader's
``run`` of a durable group of two (a caller waiting behind it), and ``_flusher.Lend.sync`` with a
lend to the flusher (whose ``lend`` frame, in the code that has one, is counted) and without.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from actionspace.ledger import _flusher, sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections

LEDGER = str(Path(sqlite_writer.__file__).parent)


def counted(fn):
    seen = Counter()

    def local(frame, event, arg):
        if event == "opcode":
            seen["opcodes"] += 1
        return local

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.startswith(LEDGER):
            seen["calls"] += 1
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return seen


folder = Path(tempfile.mkdtemp())
db = SqliteConnections(folder / "w.db", synchronous="FULL", busy_timeout_s=10.0)
db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
with db.write() as conn:
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INT)")
group = GroupCommit(db)
n = [0]


def write(conn):
    n[0] += 1
    conn.execute("INSERT INTO t VALUES (?, 1)", (f"k{n[0]}",))


group.run(write)
group.run(write)
print("lone durable run:", dict(counted(lambda: group.run(write, durable=True))))
print("lone durable run, autocommit:", dict(counted(lambda: group.run(write, durable=True, autocommit=True))))


def group_of_two():
    started = threading.Event()

    def hold(conn):
        started.set()
        deadline = time.monotonic() + 10
        while group.queued < 2 and time.monotonic() < deadline:
            time.sleep(0.001)
        write(conn)

    h = threading.Thread(target=lambda: group.run(hold))
    h.start()
    started.wait()

    def waiter():
        while group.queued < 1:
            time.sleep(0.001)
        group.run(write)

    w = threading.Thread(target=waiter)
    w.start()
    seen = counted(lambda: group.run(write, durable=True))
    h.join()
    w.join()
    return seen


group_of_two()
print("leader of a durable group of two:", dict(group_of_two()))


class FakeFlusher:
    """The real Flusher's lend (its frame counted), without its thread."""

    def __init__(self):
        self.lent = self._lent = _flusher.held_lock()

    def lend(self):
        _flusher.Flusher.lend(self)


fd = os.open(folder / "w.db-wal", os.O_RDONLY)
lock = threading.Lock()
lend = _flusher.Lend(lock)


def one_lend():
    lend.flusher = FakeFlusher()
    lend.due = True
    lend.sync(fd)


one_lend()
print("Lend.sync with a lend:", dict(counted(one_lend)))
lend.due = False
print("Lend.sync without:", dict(counted(lambda: lend.sync(fd))))
