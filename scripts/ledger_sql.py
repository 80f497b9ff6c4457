"""What the SQL a durable call writes costs by itself, beside the bench's raw-insert floor.

    python scripts/ledger_sql.py            # 8 rounds of 300 each, alternated
    python scripts/ledger_sql.py --rounds 3

A durable ``write`` call on the SQLite store makes two commits: the intent (the ledger row
inserted ``dispatched``, ``synchronous=FULL``: fsync'd) and the outcome (the row updated,
``synchronous=NORMAL``). This script runs exactly those statements — the ledger's own schema,
``INSERT`` and ``UPDATE``, the pending-action read inside the intent's transaction, rows shaped
like a call's — with no Python call path around them, alternated with the bench's floor
(``sqlite_commit.insert_per_transaction``: one fsync'd INSERT into a two-column table). The ratio
of their medians bounds what the bench's one-caller durable row can reach: a call cannot cost
less than the statements it must write. Wall and thread-CPU medians are printed (on a virtual
disk the fsync's own work shows up as CPU).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from actionspace.ledger.sqlite import SqliteLedgerStore

RUN = "run_" + "a" * 28
PER_ROUND = 300
COLUMNS = "key, run_id, node_id, tool, args_digest, arguments, state, attempts, created_at, updated_at"
COLUMNS += ", remote_id, observation, error, resolution"
# the ledger store's statements (ledger/sqlite.py), written out
PENDING = (
    f"SELECT {COLUMNS} FROM ledger_entries WHERE run_id = ? AND tool = ? AND args_digest = ?"
    " AND state IN ('dispatched', 'unknown', 'unknown_commit') ORDER BY created_at LIMIT 1"
)
INSERT = f"INSERT INTO ledger_entries ({COLUMNS}) VALUES ({', '.join('?' * 14)}) ON CONFLICT DO NOTHING"
UPDATE = (
    "UPDATE ledger_entries SET arguments = ?, state = ?, attempts = ?, created_at = ?, updated_at = ?,"
    " remote_id = ?, observation = ?, error = ?, resolution = ? WHERE key = ? AND state IN (?)"
)


def _open(path: Path, schema: str | None) -> sqlite3.Connection:
    if schema is None:  # the ledger's tables, as its store creates them
        SqliteLedgerStore(path).close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    if schema is not None:
        db.execute(schema)
    return db


def _ledger(db: sqlite3.Connection) -> Callable[[int], None]:
    def call(i: int) -> None:
        key = hashlib.sha256(b"key%d" % i).hexdigest()
        digest = hashlib.sha256(b"args%d" % i).hexdigest()
        now = time.time()
        arguments = json.dumps({"key": f"k{i}", "value": i})
        row = (key, RUN, f"n{i}", "put", digest, arguments, "dispatched", 1, now, now, None, None, None, None)
        db.execute("PRAGMA synchronous=FULL")
        db.execute("BEGIN IMMEDIATE")
        db.execute(PENDING, (RUN, "put", digest)).fetchone()
        db.execute(INSERT, row)
        db.execute("COMMIT")
        db.execute("PRAGMA synchronous=NORMAL")
        outcome = json.dumps({"status": "ok", "data": 3})
        db.execute("BEGIN IMMEDIATE")
        update = (arguments, "committed", 1, now, time.time(), None, outcome, None, None, key, "dispatched")
        db.execute(UPDATE, update)
        db.execute("COMMIT")

    return call


def _floor(db: sqlite3.Connection) -> Callable[[int], None]:
    def insert(i: int) -> None:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", (f"k{i}", i))
        db.execute("COMMIT")

    return insert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8, help="alternated rounds of 300 of each")
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory(prefix="actionspace-sql-") as tmp:
        ledger = _ledger(_open(Path(tmp) / "ledger.db", None))
        raw = "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT UNIQUE, v INTEGER)"
        floor = _floor(_open(Path(tmp) / "raw.db", raw))
        walls: dict[str, list[float]] = {"ledger": [], "floor": []}
        cpus: dict[str, list[float]] = {"ledger": [], "floor": []}
        for r in range(rounds):
            for name, run in (("ledger", ledger), ("floor", floor)):
                wall, cpu = [], []
                for i in range(r * PER_ROUND, (r + 1) * PER_ROUND):
                    w, c = time.perf_counter_ns(), time.thread_time_ns()
                    run(i)
                    cpu.append(time.thread_time_ns() - c)
                    wall.append(time.perf_counter_ns() - w)
                walls[name].append(statistics.median(wall) / 1e3)
                cpus[name].append(statistics.median(cpu) / 1e3)
    wall_us = {k: statistics.median(v) for k, v in walls.items()}
    cpu_us = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"raw insert (the floor):      wall {wall_us['floor']:7.1f} µs   cpu {cpu_us['floor']:7.1f} µs")
    print(f"a call's ledger statements:  wall {wall_us['ledger']:7.1f} µs   cpu {cpu_us['ledger']:7.1f} µs")
    ratio = wall_us["ledger"] / wall_us["floor"]
    print(
        f"ledger ÷ floor: {ratio:.2f} × by wall"
        f" (a call with no Python around its statements: {1 / ratio:.0%} of the raw rate)"
    )


if __name__ == "__main__":
    main()
