"""What the durable call's ledger statements cost on other layouts of the SQLite ledger table.

    python scripts/ledger_layouts.py                          # every layout, 30 rounds of 50 calls
    python scripts/ledger_layouts.py --rounds 40 --only current,rowless_key
    python scripts/ledger_layouts.py --grow 5000 --block 100  # a larger file, longer blocks

A durable ``write`` call on the SQLite store writes, on the file's writing connection at
``synchronous=NORMAL``: the intent (``_INSERT_UNLESS_PENDING`` of ``ledger/sqlite.py`` in
autocommit), an ``fdatasync`` of the WAL, then the outcome (``_UPDATE_MOVED`` by rowid, in autocommit,
not synced). This script runs exactly those statements on files that differ only in the ledger
table's layout: each file is made by a ``Runtime`` (the trace's tables, the tenant column, index
and triggers of ``ledger/_sqlite_tenants.py``), its ledger table then rebuilt in the layout named
(the current one rebuilt too, so every file is laid out alike), grown by ``--grow`` entries
written by the same statements unsynced, and checkpointed. Each call is timed right after one raw
insert into a second file on the same disk (the bench's ``_raw_commit``), as the bench times its
one-caller row. The layouts run in rounds, one block of ``--block`` calls each, their order turned
every round; printed: wall and thread-CPU medians over every call, the CPU of each part, and in how
many rounds the layout's block median was lower than the current layout's.

Layouts (``LAYOUTS``): the current one; bounds that drop a B-tree or the trigger (not valid
layouts: what the most any layout could save is); the table ``WITHOUT ROWID`` keyed by ``key`` or
by ``(run_id, node_id)``; the state index made partial (the unsettled entries' actions) beside a
partial index of the settled entries; one index of every entry's action and none of its state (the
outcome then writes the table alone; a listing by state scans the table); the current layout in
pages of 2 KB or 8 KB.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from actionspace.bench._durable import _raw_commit
from actionspace.ledger import _sqlite_layout as layout
from actionspace.ledger import _sqlite_tenants as tenants
from actionspace.ledger import sqlite as store
from actionspace.ledger.commit import _COMMITTABLE
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections
from actionspace.runtime import Runtime
from actionspace.types import ToolCall

PARTS = ("intent", "sync", "outcome")
_KEPT: list[Any] = []
"""What must outlive the timing (a writer closes its WAL's descriptor when dropped)."""
_TOOL_SCHEMA: Final = {
    "type": "object",
    "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
}
_COLUMNS: Final = """
    key TEXT {key}, run_id TEXT NOT NULL, node_id TEXT NOT NULL, tool TEXT NOT NULL,
    args_digest TEXT NOT NULL, arguments TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, remote_id TEXT, observation TEXT, error TEXT,
    resolution TEXT, tenant TEXT{constraints}"""
_SETTLED_PARTIAL: Final = (
    "CREATE INDEX ledger_entries_settled ON ledger_entries (state, updated_at)"
    f" WHERE NOT {layout.UNSETTLED_SQL}"
)
_UNSETTLED_PARTIAL: Final = (
    "CREATE INDEX ledger_entries_unsettled ON ledger_entries (run_id, tool, args_digest)"
    f" WHERE {layout.UNSETTLED_SQL}"
)
_PENDING_PARTIAL: Final = f"WHERE {layout.UNSETTLED_SQL} AND run_id = ? AND tool = ? AND args_digest = ?"


@dataclass(frozen=True)
class Layout:
    table: str
    """The ``CREATE TABLE`` of ``ledger_entries``."""
    indexes: tuple[str, ...] = (layout.INDEX,)
    sought_by: str = "rowid"
    """How the outcome finds its row: ``rowid``, ``key`` or ``node`` (``(run_id, node_id)``)."""
    pending: bool = True
    """The intent checks for a pending identical action (the store's ``begin_unless_pending``)."""
    pending_where: str = layout.PENDING_WHERE
    trigger: bool = True
    page_size: int | None = None


def _table(
    key: str = "PRIMARY KEY", constraints: str = ",\n    UNIQUE (run_id, node_id)", tail: str = ""
) -> str:
    return f"CREATE TABLE ledger_entries ({_COLUMNS.format(key=key, constraints=constraints)}\n){tail}"


LAYOUTS: Final = {
    "current": Layout(_table()),
    "no_state_index (bound)": Layout(_table(), indexes=(), pending=False),
    "no_pending_check (bound)": Layout(_table(), pending=False),
    "no_node_unique (bound)": Layout(_table(constraints="")),
    "no_trigger (bound)": Layout(_table(), trigger=False),
    "rowless_key": Layout(_table(tail=" WITHOUT ROWID"), sought_by="key"),
    "rowless_node": Layout(
        _table(
            key="NOT NULL UNIQUE", constraints=",\n    PRIMARY KEY (run_id, node_id)", tail=" WITHOUT ROWID"
        ),
        sought_by="node",
    ),
    "partial_indexes": Layout(
        _table(), indexes=(_UNSETTLED_PARTIAL, _SETTLED_PARTIAL), pending_where=_PENDING_PARTIAL
    ),
    "action_index": Layout(
        _table(),
        indexes=("CREATE INDEX ledger_entries_action ON ledger_entries (run_id, tool, args_digest)",),
        pending_where=_PENDING_PARTIAL,
    ),
    "pages_2k": Layout(_table(), page_size=2048),
    "pages_8k": Layout(_table(), page_size=8192),
}


def _made_file(path: Path, page_size: int | None) -> tuple[str, tuple[Any, ...]]:
    """A file as a ``Runtime`` leaves it after a few bench calls; its run and a stored row."""
    if page_size is not None:
        with sqlite3.connect(path) as db:
            db.execute(f"PRAGMA page_size = {int(page_size)}")
            db.execute("VACUUM")
        db.close()
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(
        name="put", input_schema=_TOOL_SCHEMA, fn=lambda key, value: 3, effect="write", blocking=False
    )
    run = rt.new_run()
    for i in range(3):
        rt.call(ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}")
    rt.close()
    with sqlite3.connect(path) as db:
        row = db.execute(f"{store._SELECT} WHERE node_id = 'n0'").fetchone()
    db.close()
    return run, tuple(row)


def _rebuilt(path: Path, lay: Layout) -> None:
    """The ledger table laid out as ``lay``, its rows kept, the tenant index and triggers made again."""
    cols = ", ".join((*store._COLUMNS, "tenant"))
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    for name in tenants._NAMES:
        if name.startswith("trace_runs_") or name.startswith("ledger_"):
            db.execute(f"DROP TRIGGER IF EXISTS {name}")
    db.execute("ALTER TABLE ledger_entries RENAME TO ledger_old")
    db.execute(lay.table)
    db.execute(f"INSERT INTO ledger_entries ({cols}) SELECT {cols} FROM ledger_old")
    db.execute("DROP TABLE ledger_old")
    for sql in (*lay.indexes, tenants._INDEXES[0]):
        db.execute(sql)
    for sql in tenants._TRIGGERS:
        if lay.trigger or "ledger_entries_tenant_of_new" not in sql:
            db.execute(sql)
    db.execute("COMMIT")
    db.execute("VACUUM")
    db.close()


def _ledger(path: Path, lay: Layout, run: str, template: tuple[Any, ...]) -> Callable[..., list[int]]:
    """The store's statements of one call on ``path``: each part's thread CPU (ns); unsynced when growing."""
    conns = SqliteConnections(path, synchronous="FULL", busy_timeout_s=10.0)
    conn = conns.writer()
    writer = GroupCommit(conns)
    _KEPT.append(writer)
    _, fd, _kept = writer._use(conn)  # as the store's writer makes it: NORMAL, the WAL's descriptor
    assert fd is not None, "not in WAL mode"
    cursor = conn.cursor()
    col = store._COLUMNS.index
    tool, observation = template[col("tool")], template[col("observation")]
    states = tuple(dict.fromkeys(_COMMITTABLE))
    moved = store._UPDATES[len(states)][2]
    where = {"rowid": "rowid = ? AND ", "key": "", "node": "run_id = ? AND node_id = ? AND "}[lay.sought_by]
    moved = moved.replace("rowid = ? AND ", where)
    insert = store._INSERT_UNLESS_PENDING.replace(layout.PENDING_WHERE, lay.pending_where)
    clock = time.thread_time_ns

    wal = Path(f"{path}-wal")

    def call(i: int, sync: bool, sizes: list[int] | None = None) -> list[int]:
        key = "as1_" + hashlib.sha256(b"key%d" % i).hexdigest()[:32]
        node = f"m{i}"
        digest = hashlib.sha256(b"args%d" % i).hexdigest()
        arguments = store.to_json({"key": f"k{i}", "value": i})
        now = time.time()
        row = (key, run, node, tool, digest, arguments, "dispatched", 1, now, now, None, None, None, None)
        text = observation.replace(template[col("key")], key)
        changed = ("committed", 1, now + 0.001, None, text, None, None)
        params: tuple[Any, ...]
        if lay.pending:
            sql, params = insert, (key, run, tool, digest, *row)
        else:
            sql, params = store._INSERT, row
        if sizes is not None:
            sizes.append(wal.stat().st_size)
        t0 = clock()
        if cursor.execute(sql, params).rowcount != 1:
            raise AssertionError("the intent inserted nothing")
        rowid = cursor.lastrowid
        t1 = clock()
        if sizes is not None:
            sizes.append(wal.stat().st_size)
        if sync:
            os.fdatasync(fd)
        t2 = clock()
        sought = {"rowid": (rowid,), "key": (), "node": (run, node)}[lay.sought_by]
        guard = (*sought, key, arguments, now, *states, run, node, tool, digest)
        if cursor.execute(moved, (*changed, *guard)).rowcount != 1:
            raise AssertionError("the outcome changed nothing")
        t3 = clock()
        if sizes is not None:
            sizes.append(wal.stat().st_size)
        return [t1 - t0, t2 - t1, t3 - t2]

    return call


def _frames(path: Path, call: Callable[..., list[int]], start: int, n: int) -> tuple[float, float]:
    """WAL frames a synced intent and its outcome append, averaged over ``n`` calls (from the WAL's
    size: a frame is its page and 24 bytes of header), the WAL checkpointed first."""
    db = sqlite3.connect(path, isolation_level=None)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    sizes: list[int] = []
    for i in range(start, start + n):
        call(i, True, sizes)
    frame = page + 24
    intent = sum(sizes[k + 1] - sizes[k] for k in range(0, len(sizes), 3))
    outcome = sum(sizes[k + 2] - sizes[k + 1] for k in range(0, len(sizes), 3))
    return intent / n / frame, outcome / n / frame


def med(values: list[int]) -> float:
    return statistics.median(values) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--grow", type=int, default=2300, help="entries written before timing")
    parser.add_argument("--only", help="comma-separated layout names (current always runs)")
    parser.add_argument("--frames", type=int, default=100, help="calls whose WAL frames are counted")
    args = parser.parse_args()
    names = list(LAYOUTS)
    if args.only:
        wanted = set(args.only.split(","))
        names = [n for n in names if n == "current" or n.split(" ")[0] in wanted]
    with tempfile.TemporaryDirectory(prefix="actionspace-layouts-", dir="/tmp") as tmp:
        calls: dict[str, Callable[..., list[int]]] = {}
        for name in names:
            lay = LAYOUTS[name]
            path = Path(tmp) / f"{name.split(' ')[0]}.db"
            run, template = _made_file(path, lay.page_size)
            _rebuilt(path, lay)
            calls[name] = call = _ledger(path, lay, run, template)
            for i in range(args.grow):
                call(10**7 + i, False)
            db = sqlite3.connect(path)
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
        for name in names:
            path = Path(tmp) / f"{name.split(' ')[0]}.db"
            fi, fo = _frames(path, calls[name], 10**8, args.frames)
            print(f"{name:<26} WAL frames a call: intent {fi:.2f}, outcome {fo:.2f}")
        raw_db, raw = _raw_commit(Path(tmp) / "raw.db")
        wall: dict[str, list[int]] = {n: [] for n in ["floor", *names]}
        cpu: dict[str, list[int]] = {n: [] for n in ["floor", *names]}
        parts: dict[str, list[list[int]]] = {n: [[] for _ in PARTS] for n in names}
        blocks: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        i = 0
        for r in range(-2, args.rounds):  # two rounds of warm-up
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                bw, bc = [], []
                for _ in range(args.block):
                    i += 1
                    c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                    raw(i)
                    t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                    each = calls[name](i, True)
                    t2, c2 = time.perf_counter_ns(), time.thread_time_ns()
                    if r >= 0:
                        wall["floor"].append(t1 - t0)
                        cpu["floor"].append(c1 - c0)
                        bw.append(t2 - t1)
                        bc.append(c2 - c1)
                        for j, ns in enumerate(each):
                            parts[name][j].append(ns)
                if r >= 0:
                    wall[name].extend(bw)
                    cpu[name].extend(bc)
                    blocks[name].append((statistics.median(bw), statistics.median(bc)))
        raw_db.close()
        print(f"{'raw insert beside':<26} wall {med(wall['floor']):7.1f}  cpu {med(cpu['floor']):6.1f} µs")
        base = blocks["current"]
        for name in names:
            split = "  ".join(f"{p} {med(v):5.1f}" for p, v in zip(PARTS, parts[name], strict=True))
            line = f"{name:<26} wall {med(wall[name]):7.1f}  cpu {med(cpu[name]):6.1f} µs  ({split})"
            if name != "current":
                lw = sum(b[0] < a[0] for a, b in zip(base, blocks[name], strict=True))
                lc = sum(b[1] < a[1] for a, b in zip(base, blocks[name], strict=True))
                dw = statistics.median(b[0] - a[0] for a, b in zip(base, blocks[name], strict=True)) / 1e3
                dc = statistics.median(b[1] - a[1] for a, b in zip(base, blocks[name], strict=True)) / 1e3
                line += f"  vs current: wall {dw:+6.1f} (lower {lw}/{len(base)}) cpu {dc:+6.1f} (lower {lc})"
            print(line)


if __name__ == "__main__":
    main()
