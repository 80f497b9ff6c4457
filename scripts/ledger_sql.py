"""What the SQL a durable call writes costs by itself, beside the bench's raw-insert floor.

    python scripts/ledger_sql.py                    # 3,000 calls after 300, each beside a raw insert
    python scripts/ledger_sql.py --calls 1500
    python scripts/ledger_sql.py --b "PRAGMA cache_size = -8000"      # A/B: the same on a second file
    python scripts/ledger_sql.py --b "DROP TRIGGER ledger_entries_tenant_of_new"
    python scripts/ledger_sql.py --whole-calls --swap --b "PRAGMA cache_size = -16000"

A durable ``write`` call on the SQLite store runs, on the file's writing connection: the run's
revision read (``GroupCommit.read_kept``: ``PRAGMA data_version``), the intent (one ``INSERT OR
IGNORE`` of the ledger row in autocommit, the pending-action check a subquery of it, then
an ``fdatasync`` of the WAL file: the writer runs at ``synchronous=NORMAL`` and syncs the WAL
itself) and the outcome (the ``UPDATE`` of the moved columns by rowid, in autocommit, not synced);
the writer's own statements on the cursor it keeps, the ledger's on the store's.
This script runs exactly those statements, taken from the store's modules rather than written out
again (``ledger/sqlite.py``, ``ledger/sqlite_writer.py``), on a connection the store's own code
opens and makes ready, in a file a ``Runtime`` made (so the trace's tables, the tenant trigger and
every index are there), with rows shaped like the bench's (its arguments, its ~650-byte
observation) and no Python call path around them. Each call is timed right after one raw insert
(the bench's ``sqlite_commit.insert_per_transaction``, its own function), as the bench times its
one-caller row. The ratio of the medians bounds what that row can reach: a call cannot cost less
than the statements it must write. Wall and thread-CPU medians are printed, and the thread CPU of
each part (the revision read, the intent's statements, its sync, the outcome).

``--b SQL`` (repeatable) runs the same calls on a second copy of the file whose writing
connection first ran ``SQL`` (a pragma, a changed trigger, …), alternated call by call with the
first (their order swapped every call); each is printed with how many blocks of 100 calls had a
lower median CPU for the second. ``--b-page-size N`` makes the second file with pages of ``N``
bytes instead (a page size is chosen before a file's first table). ``--swap`` puts the variant on
the first file (the files' order moves the clocks by a few µs under load: run both ways).
``--whole-calls`` times the bench's whole ``rt.call`` on a ``Runtime`` of each file instead of the
statements alone (the variant on the runtime's writer).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from actionspace.bench._durable import _raw_commit
from actionspace.ledger import sqlite as store
from actionspace.ledger.commit import _COMMITTABLE
from actionspace.ledger.sqlite_writer import DATA_VERSION, GroupCommit, SqliteConnections
from actionspace.runtime import Runtime
from actionspace.types import ToolCall

PARTS = ("revision", "intent", "sync", "outcome")
BLOCK = 100
_KEPT: list[Any] = []
"""What must outlive the timing (a writer closes its WAL's descriptor when dropped)."""
_SCHEMA: Final = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}


def _made_file(path: Path, page_size: int | None = None) -> tuple[str, tuple[Any, ...]]:
    """A file as a ``Runtime`` leaves it after a few bench calls (made with ``page_size`` when
    given); its run and a stored row."""
    if page_size is not None:
        with sqlite3.connect(path) as db:
            db.execute(f"PRAGMA page_size = {int(page_size)}")
            db.execute("VACUUM")  # an empty file: the page size is now its own
        db.close()
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: 3, effect="write", blocking=False)
    run = rt.new_run()
    for i in range(3):
        rt.call(ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}")
    rt.close()
    with sqlite3.connect(path) as db:
        row = db.execute(f"{store._SELECT} WHERE node_id = 'n0'").fetchone()
    db.close()
    return run, tuple(row)


def _ledger(
    path: Path, run: str, template: tuple[Any, ...], setup: list[str]
) -> tuple[Callable[[int], Any], Callable[[Any], list[int]]]:
    """The store's statements of one call on ``path``; returns each part's thread CPU (ns)."""
    conns = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    conn = conns.writer()
    writer = GroupCommit(conns)
    _KEPT.append(writer)
    _, fd, kept = writer._use(conn)  # as the store's writer makes it: NORMAL, the WAL's descriptor
    assert fd is not None, "not in WAL mode"
    for sql in setup:
        conn.execute(sql).fetchall()
    cursor = conn.cursor()  # the ledger store keeps one cursor of the writer
    col = store._COLUMNS.index
    tool, observation = template[col("tool")], template[col("observation")]
    states = tuple(dict.fromkeys(_COMMITTABLE))
    moved = store._UPDATES[len(states)][2]  # the outcome of an entry begun by this store
    clock = time.thread_time_ns

    def rows(i: int) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The intent's row and the outcome's parameters of call ``i`` (made before it is timed)."""
        key = "as1_" + hashlib.sha256(b"key%d" % i).hexdigest()[:32]
        node = f"m{i}"  # none of the nodes the Runtime wrote
        digest = hashlib.sha256(b"args%d" % i).hexdigest()
        arguments = store.to_json({"key": f"k{i}", "value": i})
        now = time.time()
        row = (key, run, node, tool, digest, arguments, "dispatched", 1, now, now, None, None, None, None)
        text = observation.replace(template[col("key")], key)
        changed = ("committed", 1, now + 0.001, None, text, None, None)
        return row, (*changed, key, arguments, now, *states, run, node, tool, digest)

    def call(made: tuple[tuple[Any, ...], tuple[Any, ...]]) -> list[int]:
        row, outcome = made
        intent = (row[0], row[1], row[3], row[4], row[0], *row[1:])  # made as the store makes it
        t0 = clock()
        kept.execute(DATA_VERSION).fetchall()
        t1 = clock()
        if cursor.execute(store._INSERT_UNLESS_PENDING, intent).rowcount != 1:
            raise AssertionError("the intent inserted nothing (an unsettled identical action?)")
        rowid = cursor.lastrowid  # one statement in autocommit: its own transaction
        t2 = clock()
        os.fdatasync(fd)
        t3 = clock()
        if cursor.execute(moved, (*outcome[:7], rowid, *outcome[7:])).rowcount != 1:
            raise AssertionError("the outcome changed nothing")
        t4 = clock()
        return [t1 - t0, t2 - t1, t3 - t2, t4 - t3]

    return rows, call


def _whole_calls(path: Path, setup: list[str]) -> tuple[Callable[[int], Any], Callable[[Any], list[int]]]:
    """The bench's whole ``rt.call`` of its ``write`` tool on a ``Runtime`` of ``path`` instead, the
    file's writer having run ``setup`` first; no parts."""
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: 3, effect="write", blocking=False)
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "k", "value": 0}), run_id=run, node_id="first")
    writer = GroupCommit.open(path, busy_timeout_s=10.0)  # the runtime's: one writer a file and process
    _KEPT.extend((rt, writer))
    for sql in setup:
        writer._db.writer().execute(sql).fetchall()

    def made(i: int) -> tuple[ToolCall, str]:
        return ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), f"n{i}"

    def call(m: tuple[ToolCall, str]) -> list[int]:
        if rt.call(m[0], run_id=run, node_id=m[1]).status != "ok":
            raise AssertionError("the call failed")
        return []

    return made, call


def _median_us(values: list[int]) -> float:
    return statistics.median(values) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="timed calls (after a tenth as many)")
    parser.add_argument("--b", action="append", default=[], metavar="SQL", help="the second file's setup")
    parser.add_argument("--b-page-size", type=int, help="the second file made with this page size")
    parser.add_argument("--swap", action="store_true", help="the --b variant on the first file instead")
    parser.add_argument("--whole-calls", action="store_true", help="whole rt.calls, not the statements alone")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="actionspace-sql-") as tmp:
        made = Path(tmp) / "made.db"
        run, template = _made_file(made)
        second = bool(args.b) or args.b_page_size is not None
        names = ["A", "B"] if second else ["A"]
        variant = "A" if args.swap else "B"
        if args.b_page_size is not None:  # the variant's file made apart: its own run and rows
            made_b = Path(tmp) / "made_b.db"
            run_b, template_b = _made_file(made_b, args.b_page_size)
        calls: dict[str, tuple[Callable[[int], Any], Callable[[Any], list[int]]]] = {}
        for name in names:
            path, setup = Path(tmp) / f"{name}.db", args.b if name == variant else []
            if args.whole_calls:
                calls[name] = _whole_calls(path, setup)
            elif name == variant and args.b_page_size is not None:
                shutil.copy(made_b, path)
                calls[name] = _ledger(path, run_b, template_b, setup)
            else:
                shutil.copy(made, path)
                calls[name] = _ledger(path, run, template, setup)
        raw_db, raw = _raw_commit(Path(tmp) / "raw.db")  # the bench's floor, same disk
        wall: dict[str, list[int]] = {n: [] for n in ["floor", *names]}
        cpu: dict[str, list[int]] = {n: [] for n in ["floor", *names]}
        parts: dict[str, list[list[int]]] = {n: [[] for _ in PARTS] for n in names}
        warm = max(1, args.calls // 10)
        for i in range(warm + args.calls):
            order = names if i % 2 == 0 else names[::-1]
            for name in order:
                made = calls[name][0](i)
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                raw(10**6 + 2 * i + (name == "B"))
                t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                each = calls[name][1](made)
                t2, c2 = time.perf_counter_ns(), time.thread_time_ns()
                if i >= warm:
                    wall["floor"].append(t1 - t0)
                    cpu["floor"].append(c1 - c0)
                    wall[name].append(t2 - t1)
                    cpu[name].append(c2 - c1)
                    for j, ns in enumerate(each):
                        parts[name][j].append(ns)
        raw_db.close()
    floor = f"wall {_median_us(wall['floor']):7.1f} µs   cpu {_median_us(cpu['floor']):7.1f} µs"
    print(f"{'raw insert (the floor):':<30}{floor}")
    for name in names:
        label = "the same, with --b" if second and name == variant else "a call's statements"
        label = label.replace("a call's statements", "whole calls") if args.whole_calls else label
        print(f"{label + ':':<30}wall {_median_us(wall[name]):7.1f} µs   cpu {_median_us(cpu[name]):7.1f} µs")
        if parts[name][0]:
            split = "  ".join(f"{p} {_median_us(v):.1f}" for p, v in zip(PARTS, parts[name], strict=True))
            print(f"{'':<30}cpu by part (µs): {split}")
        ratio = statistics.median(wall[name]) / statistics.median(wall["floor"])
        by_cpu = statistics.median(cpu[name]) / statistics.median(cpu["floor"])
        print(
            f"{'':<30}÷ floor: {ratio:.2f} × by wall, {by_cpu:.2f} × by cpu ({1 / ratio:.0%} of the raw rate)"
        )
    if second:
        other = "A" if variant == "B" else "B"
        blocks = range(0, args.calls - BLOCK + 1, BLOCK)
        lower = {
            kind: sum(
                statistics.median(got[variant][b : b + BLOCK]) < statistics.median(got[other][b : b + BLOCK])
                for b in blocks
            )
            for kind, got in (("cpu", cpu), ("wall", wall))
        }
        print(
            f"--b lower in {lower['cpu']}/{len(blocks)} blocks by cpu, {lower['wall']}/{len(blocks)} by wall"
        )


if __name__ == "__main__":
    main()
