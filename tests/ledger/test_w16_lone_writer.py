"""A write handed to an idle file writer with nothing else waiting is led at once.

A lone caller (one thread writing a SQLite file: the one-caller durable row) used to queue its
operation, take it back out of the queue as a group's leader (``_lead``: a second turn of the
writer's lock and, while the trace's deferred operation was queued, two list comprehensions over the
queue) and then scan the queue for an heir. Its group is now itself, led in ``run``; the heir is
looked for only when a caller waits. Counted in Python calls (load-independent), with the concurrent
and deferred cases held to what they were.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections

DEADLINE_S = 30.0
BUDGET = 3
"""Python calls in ``sqlite_writer``'s own frames per lone write: ``run``, ``_commit_alone`` and
``_let_go`` (no slot made, no heir looked for when nobody queued). The code before: 5 with nothing
deferred, 9 with a deferred operation queued; then 4 (``run``, its slot's ``__init__``, ``_commit``
and ``_hand_on``)."""


def _writer(tmp_path: Path) -> GroupCommit:
    db = SqliteConnections(tmp_path / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1)
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    group = GroupCommit(db)
    group.run(lambda conn: None)  # the writing connection made ready once (its level, its WAL's descriptor)
    return group


def _calls_per_write(group: GroupCommit, n: int, first: int) -> float:
    seen: Counter[str] = Counter()
    here = sqlite_writer.__file__

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename == here:
            seen[frame.f_code.co_name] += 1

    def insert(i: int) -> sqlite_writer.Operation:
        return lambda conn: conn.execute("INSERT INTO t (k) VALUES (?)", (f"k{i}",)).rowcount

    sys.setprofile(profile)
    try:
        results = [group.run(insert(i), durable=i % 2 == 0) for i in range(first, first + n)]
    finally:
        sys.setprofile(None)
    assert results == [1] * n
    return sum(seen.values()) / n


def test_a_lone_write_is_led_at_once(tmp_path: Path) -> None:
    group = _writer(tmp_path)
    try:
        assert _calls_per_write(group, 20, 0) <= BUDGET
    finally:
        group.close()


def test_a_lone_write_beside_a_deferred_operation_is_led_at_once_and_leaves_it_deferred(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher does not take it meanwhile
    group = _writer(tmp_path)
    try:
        group.defer(lambda conn: conn.execute("INSERT INTO t (k) VALUES ('deferred')"))
        assert _calls_per_write(group, 20, 0) <= BUDGET
        reader = sqlite3.connect(tmp_path / "w.db")
        try:
            assert reader.execute("SELECT count(*) FROM t WHERE k = 'deferred'").fetchone() == (0,)
            group.settle()
            assert reader.execute("SELECT count(*) FROM t").fetchone() == (21,)
        finally:
            reader.close()
    finally:
        group.close()


def test_callers_arriving_while_a_lone_write_commits_lead_the_next_group_with_their_own_results(
    tmp_path: Path,
) -> None:
    group = _writer(tmp_path)
    entered, release = threading.Event(), threading.Event()
    results: dict[int, Any] = {}

    def hold(conn: sqlite3.Connection) -> str:
        conn.execute("INSERT INTO t (k) VALUES ('lone')")
        entered.set()
        assert release.wait(DEADLINE_S)
        return "lone"

    def write(i: int) -> None:
        def op(conn: sqlite3.Connection) -> int:
            if i == 3:
                raise ValueError("refused")  # rolled back alone, raised to its caller alone
            conn.execute("INSERT INTO t (k) VALUES (?)", (f"w{i}",))
            return i

        try:
            results[i] = group.run(op, durable=i % 2 == 0)
        except ValueError as exc:
            results[i] = str(exc)

    lone = threading.Thread(target=lambda: results.__setitem__(-1, group.run(hold)))
    lone.start()
    assert entered.wait(DEADLINE_S)
    writers = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for thread in writers:
        thread.start()
    pause = threading.Event()
    for _ in range(int(DEADLINE_S * 1000)):
        if group.queued == 6:
            break
        pause.wait(0.001)
    assert group.queued == 6
    release.set()
    for thread in [lone, *writers]:
        thread.join(DEADLINE_S)
    try:
        assert results == {-1: "lone", 0: 0, 1: 1, 2: 2, 3: "refused", 4: 4, 5: 5}
        reader = sqlite3.connect(tmp_path / "w.db")
        try:
            keys = {k for (k,) in reader.execute("SELECT k FROM t")}
        finally:
            reader.close()
        assert keys == {"lone", "w0", "w1", "w2", "w4", "w5"}
        assert group.queued == 0 and _calls_per_write(group, 5, 100) <= BUDGET  # idle again: led at once
    finally:
        group.close()
