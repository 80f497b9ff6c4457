"""A statement of a SQLite store's reading connection that reads no row answers one shared empty
``Rows``: nothing is made for a miss (a read of a missing key made a new ``Rows`` each time).

- Two reads of missing keys answer the very same object, read as an empty cursor: ``fetchone``
  None, ``fetchall`` and ``fetchmany`` a new empty list, nothing when iterated.
- It never holds a row: what would add one raises ``TypeError``, and a miss after that is still
  empty; a read that finds rows answers its own ``Rows``; a write still answers its cursor (its
  ``rowcount`` and ``lastrowid``).
- Over generated keys, present or not, ``get`` answers what a plain ``sqlite3`` connection reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.sqlite import SqliteLedgerStore

_MISS = "SELECT key FROM ledger_entries WHERE key = ?"


def _store(path: Path) -> SqliteLedgerStore:
    store = SqliteLedgerStore(path)
    for i in range(3):
        store.begin(
            LedgerEntry(
                key=f"k{i}", run_id="r", node_id=f"n{i}", tool="t", args_digest="d", arguments={"i": i}
            )
        )
    return store


def test_reads_of_no_row_answer_one_shared_empty_answer(tmp_path: Path) -> None:
    store = _store(tmp_path / "a.db")
    try:
        conn = store._db.conn()
        first, second = conn.execute(_MISS, ("nope",)), conn.execute(_MISS, ("other",))
        assert first is second  # the old code: a new Rows a miss
        assert first.fetchone() is None and list(first) == []
        one, two = first.fetchall(), second.fetchall()
        assert one == [] and two == [] and one is not two and first.fetchmany(3) == []
        assert store.get("nope") is None and store.get_node("r", "nowhere") is None
        found = conn.execute(_MISS, ("k1",))
        assert found is not first and found.fetchall() == [("k1",)]
        written = conn.execute("UPDATE ledger_entries SET attempts = attempts WHERE key = ?", ("nope",))
        assert written is not first and written.rowcount == 0
    finally:
        store.close()


def test_the_shared_empty_answer_never_holds_a_row(tmp_path: Path) -> None:
    store = _store(tmp_path / "a.db")
    try:
        empty: Any = store._db.conn().execute(_MISS, ("nope",))
        adds: list[Callable[[], object]] = [
            lambda: empty.append(("x",)),
            lambda: empty.extend([("x",)]),
            lambda: empty.insert(0, ("x",)),
            lambda: empty.__setitem__(slice(0, 0), [("x",)]),
            lambda: empty.__iadd__([("x",)]),
        ]
        for add in adds:
            with pytest.raises(TypeError):
                add()
        empty.close()
        again = store._db.conn().execute(_MISS, ("still-nope",))
        assert again is empty and again.fetchall() == [] and again.fetchone() is None
    finally:
        store.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["k0", "k1", "k2"]),
            st.text(st.characters(codec="utf-8"), max_size=8),
        ),
        max_size=20,
    )
)
def test_get_answers_what_a_plain_connection_reads(tmp_path: Path, keys: list[str]) -> None:
    path = tmp_path / "p.db"
    store = _store(path) if not path.exists() else SqliteLedgerStore(path)
    plain = sqlite3.connect(path)
    try:
        for key in keys:
            got = store.get(key)
            row = plain.execute("SELECT key, arguments FROM ledger_entries WHERE key = ?", (key,)).fetchone()
            if row is None:
                assert got is None
            else:
                assert got is not None and (got.key, got.arguments) == (row[0], {"i": int(row[0][1])})
    finally:
        plain.close()
        store.close()
