"""The B-trees a durable call writes on the SQLite ledger, the indexes every lookup seeks, and files
made with the earlier layout (two secondary indexes) opened by this one.

What a transaction wrote is read from the WAL itself: its frames after a checkpoint restarted it,
each a page, named by the B-tree that page belongs to (``dbstat``).
"""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace.ledger.entries import STATES, LedgerEntry
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import NOW, entry
from tests.proc import WAIT_FOR, at_once

_TABLE_AND_KEYS = {"ledger_entries", "sqlite_autoindex_ledger_entries_1", "sqlite_autoindex_ledger_entries_2"}

_EARLIER_SCHEMA = """
CREATE TABLE ledger_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO ledger_meta (key, value) VALUES ('schema_version', '1');
CREATE TABLE ledger_entries (
    key         TEXT    PRIMARY KEY,
    run_id      TEXT    NOT NULL,
    node_id     TEXT    NOT NULL,
    tool        TEXT    NOT NULL,
    args_digest TEXT    NOT NULL,
    arguments   TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL,
    remote_id   TEXT,
    observation TEXT,
    error       TEXT,
    resolution  TEXT,
    UNIQUE (run_id, node_id)
);
"""
_EARLIER_INDEX_DDL = """
CREATE INDEX IF NOT EXISTS ledger_entries_state_updated ON ledger_entries (state, updated_at);
CREATE INDEX IF NOT EXISTS ledger_entries_action ON ledger_entries (run_id, tool, args_digest);
"""
_EARLIER_SCHEMA += _EARLIER_INDEX_DDL
"""The ledger's tables as the earlier layout made them (schema version 1, as now)."""
_EARLIER_INDEXES = ("ledger_entries_state_updated", "ledger_entries_action")


def _written_trees(db: Path, write: Callable[[], Any]) -> set[str]:
    """The B-trees of the ledger table whose pages ``write`` put in the WAL."""
    side = sqlite3.connect(db, isolation_level=None)
    try:
        busy, _, _ = side.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
        write()
        data = (db.parent / f"{db.name}-wal").read_bytes()
        names = dict(side.execute("SELECT pageno, name FROM dbstat").fetchall())
    finally:
        side.close()
    page_size, salt = struct.unpack(">I", data[8:12])[0], data[16:24]
    pages, at = set(), 32
    while at + 24 + page_size <= len(data) and data[at + 8 : at + 16] == salt:
        pages.add(struct.unpack(">I", data[at : at + 4])[0])
        at += 24 + page_size
    assert pages, "nothing was written"
    return {names[p] for p in pages if p in names and "ledger_entries" in names[p]}


def _index_names(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ledger_entries'"
        )
        return {str(row[0]) for row in rows}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteLedgerStore]:
    s = SqliteLedgerStore(tmp_path / "a.db")
    yield s
    s.close()


def _settle(s: SqliteLedgerStore, e: LedgerEntry, state: str = "committed") -> None:
    moved = e.evolve(state=state, updated_at=e.updated_at + 1, observation={"status": "ok", "data": 3})
    assert s.transition(e.key, ["dispatched"], moved) is not None


def test_an_intent_writes_the_table_its_two_keys_and_one_index_and_its_outcome_two(
    store: SqliteLedgerStore, tmp_path: Path
) -> None:
    for i in range(40):  # a ledger with settled entries, as a durable call finds it
        begun = store.begin_unless_pending(entry(f"n{i}", amount=i, state="dispatched"))
        _settle(store, begun.entry)
    intent = entry("next", amount=1_000, state="dispatched", at=NOW + 100)

    written = _written_trees(tmp_path / "a.db", lambda: store.begin_unless_pending(intent))
    # the earlier layout's intent wrote five: the state index and the action index besides these
    assert written - _TABLE_AND_KEYS == {"ledger_entries_state"}
    assert written >= _TABLE_AND_KEYS

    outcome = _written_trees(tmp_path / "a.db", lambda: _settle(store, intent))
    assert outcome == {"ledger_entries", "ledger_entries_state"}


def _every_lookup(s: SqliteLedgerStore) -> dict[str, Any]:
    """Call each reading and writing method of the store; what each answered, comparable."""
    entries = [
        entry(f"n{i}", run_id=f"r{i % 2}", amount=i % 3, at=NOW + i, state=state)
        for i, state in enumerate(
            ["dispatched", "accepted", "dispatched", "unknown", "unknown_commit", "dispatched"]
        )
    ]
    for e in entries:
        s.begin(e)
    _settle(s, entries[0])
    _settle(s, entries[2], "failed")
    s.transition_at(
        entries[5].key, "dispatched", 0, entries[5].evolve(state="committed", updated_at=NOW + 50)
    )
    twin = entry("twin", run_id="r1", amount=0, state="dispatched")  # r1, amount 0: unknown n3 above
    answers: dict[str, Any] = {
        "pending": s.begin_unless_pending(twin).pending,
        "pending_action": s.pending_action("r1", "pay@1", entries[3].args_digest),
        "get": s.get(entries[1].key),
        "node": s.get_node("r0", "n4"),
        "of": sorted(s.entries_of("r0", ["n0", "n2", "n4", "none"])),
    }
    for state in STATES:
        answers[f"list {state}"] = [e.key for e in s.list(state=state, limit=10)]
    answers["purged"] = s.purge(older_than=NOW + 2)
    answers["left"] = sorted(e.key for e in s.list(limit=10))
    return answers


_EXPECTED_SEEKS = {
    "the pending check": "ledger_entries_state (<expr>=? AND <expr>=? AND <expr>=? AND <expr>=?)",
    "a settled state's entries": "ledger_entries_state (<expr>=? AND <expr>=? AND <expr>=? AND <expr>=?",
}


@pytest.mark.parametrize("earlier", [False, True], ids=["new file", "file of the earlier layout"])
def test_every_lookup_seeks_an_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: bool) -> None:
    db = tmp_path / "a.db"
    if earlier:
        with sqlite3.connect(db) as conn:
            conn.executescript(_EARLIER_SCHEMA)
    statements: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    s = SqliteLedgerStore(db)
    try:
        _every_lookup(s)
    finally:
        s.close()
    monkeypatch.undo()
    assert _index_names(db) == {
        "sqlite_autoindex_ledger_entries_1",
        "sqlite_autoindex_ledger_entries_2",
        "ledger_entries_state",
    }
    lookups = [
        sql
        for sql in statements
        if "ledger_entries" in sql
        and sql.lstrip().split()[0] in ("SELECT", "UPDATE", "DELETE")
        and "sqlite_master" not in sql
    ]
    lookups.append("SELECT state FROM ledger_entries WHERE key = 'k'")  # the budget store's
    plans: dict[str, list[str]] = {}
    with sqlite3.connect(db) as conn:
        for sql in lookups:
            plans[sql] = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    listing_all = [sql for sql in plans if "WHERE" not in sql and "ORDER BY updated_at" in sql]
    assert len(listing_all) == 1  # list() of every state: a sort of the whole table, as before
    for sql, plan in plans.items():
        if sql not in listing_all:
            assert plan and all(step.startswith(("SEARCH", "USE TEMP B-TREE")) for step in plan), (sql, plan)
    pending = [plan for sql, plan in plans.items() if "CASE WHEN" in sql and "= 'r1'" in sql]
    assert pending and all(any(_EXPECTED_SEEKS["the pending check"] in step for step in p) for p in pending)
    settled = [plans[sql] for sql in plans if "IS NULL" in sql and "ORDER BY" in sql]
    assert len(settled) == len(STATES) - 3  # accepted, committed, failed
    assert all(any(_EXPECTED_SEEKS["a settled state's entries"] in step for step in p) for p in settled)


def test_a_file_of_the_earlier_layout_answers_as_a_new_one(tmp_path: Path) -> None:
    new = SqliteLedgerStore(tmp_path / "new.db")
    try:
        expected = _every_lookup(new)
    finally:
        new.close()
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(_EARLIER_SCHEMA)
    old = SqliteLedgerStore(db)
    try:
        assert _every_lookup(old) == expected
        assert old.schema_version() == 1
    finally:
        old.close()
    assert not _index_names(db) & set(_EARLIER_INDEXES)


def _write_earlier(db: Path, *entries: LedgerEntry) -> None:
    """Insert ``entries`` as an earlier version does, under the earlier indexes."""
    with sqlite3.connect(db) as conn:
        for e in entries:
            row = e.to_dict()
            for column in ("arguments", "observation", "error", "resolution"):
                row[column] = None if row[column] is None else json.dumps(row[column])
            columns = ", ".join(row)
            marks = ", ".join(f":{c}" for c in row)
            conn.execute(f"INSERT INTO ledger_entries ({columns}) VALUES ({marks})", row)


def test_entries_written_under_the_earlier_layout_are_found_after_the_move(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(_EARLIER_SCHEMA)
    unknown = entry("n1", state="unknown", amount=5)
    done = entry("n2", state="committed", amount=6, at=NOW + 1, observation={"status": "ok"})
    sent = entry("n3", state="dispatched", amount=7, at=NOW + 2)
    _write_earlier(db, unknown, done, sent)
    moved = SqliteLedgerStore(db)
    try:
        assert not _index_names(db) & set(_EARLIER_INDEXES)
        found = moved.pending_action("r1", "pay@1", unknown.args_digest)
        assert found == unknown
        assert moved.list(state="committed") == [done]
        assert moved.list(state="dispatched") == [sent]
        assert moved.get_node("r1", "n3") == sent
    finally:
        moved.close()
    with sqlite3.connect(db) as conn:  # an earlier version opens the file again, and writes
        conn.executescript(_EARLIER_INDEX_DDL)
        conn.execute(
            "UPDATE ledger_entries SET state = 'unknown', updated_at = ? WHERE key = ?", (NOW + 3, sent.key)
        )
    _write_earlier(db, entry("n4", state="committed", amount=8, at=NOW + 4))
    assert set(_EARLIER_INDEXES) <= _index_names(db)
    again = SqliteLedgerStore(db)
    try:
        assert not _index_names(db) & set(_EARLIER_INDEXES)
        assert [e.node_id for e in again.list(state="unknown")] == ["n3", "n1"]
        later = again.pending_action("r1", "pay@1", sent.args_digest)
        assert later is not None and later.key == sent.key and later.state == "unknown"
        assert [e.node_id for e in again.list(state="committed")] == ["n4", "n2"]
        assert again.purge(older_than=NOW + 2) == 1
        assert again.get(done.key) is None
        assert [e.node_id for e in again.list(state="committed")] == ["n4"]
    finally:
        again.close()


_OPENER = (
    WAIT_FOR
    + """
import json, sys
from actionspace.ledger.sqlite import SqliteLedgerStore
from tests.ledger.factories import entry

path, node, go = sys.argv[1:4]
print("ready", flush=True)
wait_for(go)
store = SqliteLedgerStore(path)  # processes open the file of the earlier layout at once
begun = store.begin_unless_pending(entry(node, amount=int(node[1:]), state="dispatched"))
found = store.pending_action("r1", "pay@1", begun.entry.args_digest)
print(json.dumps({"created": begun.created, "found": found.key if found else None, "key": begun.entry.key}))
store.close()
"""
)


def test_processes_opening_a_file_of_the_earlier_layout_at_once_each_write_and_find_their_entry(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:
        conn.executescript(_EARLIER_SCHEMA)
        conn.execute("PRAGMA journal_mode = WAL")
    nodes = ["n1", "n2", "n3"]
    said = at_once(_OPENER, [[str(db), node, str(tmp_path / "go")] for node in nodes], tmp_path / "go")
    assert [answer["created"] for answer in said] == [True] * 3
    assert all(answer["found"] == answer["key"] for answer in said)
    assert not _index_names(db) & set(_EARLIER_INDEXES)
    assert "ledger_entries_state" in _index_names(db)
    reopened = SqliteLedgerStore(db)
    try:
        assert sorted(e.key for e in reopened.list(state="dispatched")) == sorted(a["key"] for a in said)
    finally:
        reopened.close()
