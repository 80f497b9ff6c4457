"""The SQLite trace store's held rows written by its file's writer: a few statements, no Python a row.

A call's records wait in the store, encoded by the appending thread as the flat list of values the
statements bind (kind, ts, call id, data, then the next row's); the writer's deferred operation
numbers a run's rows after its last stored event and inserts them :data:`CHUNKS` rows a statement,
binding the run's id and first number once. Nothing is built per row while the writer is held:
with several callers, each Python step there is a wait for the interpreter's lock that SQLite let
go of around the previous statement, and every queued intent waits behind it.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

__all__ = ["CHUNKS", "HELD_COLUMNS", "insert_held"]

CHUNKS: Final = (81, 27, 9, 3, 1)
"""Rows per INSERT (:func:`insert_held`); five texts the connection's statement cache keeps. Powers
of three: a call of nine records (a durable call's) is one statement, and so are three of them."""
HELD_COLUMNS: Final = 4
"""Values a held row keeps (kind, ts, call id, data): its run and number are bound once a statement."""


def _statement(rows: int) -> str:
    """An INSERT of ``rows`` rows of one run numbered from ``?2`` on, each row's values after it."""
    values = [f"(?1, ?2 + {i}, ?{3 + 4 * i}, ?{4 + 4 * i}, ?{5 + 4 * i}, ?{6 + 4 * i})" for i in range(rows)]
    return "INSERT INTO trace_events (run_id, seq, kind, ts, call_id, data) VALUES " + ", ".join(values)


_INSERTS: Final = {n: _statement(n) for n in CHUNKS}


def insert_held(conn: sqlite3.Connection, run_id: str, base: int, values: list[Any]) -> None:
    """Insert the held rows ``values`` (flat, :data:`HELD_COLUMNS` a row) of ``run_id`` in order,
    numbered from ``base``, :data:`CHUNKS` rows a statement: not one statement a row, each a run of
    its own and a release of the interpreter's lock to take back."""
    rows, at, width = len(values) // HELD_COLUMNS, 0, HELD_COLUMNS
    for size in CHUNKS:
        while rows - at >= size:
            conn.execute(_INSERTS[size], (run_id, base + at, *values[at * width : (at + size) * width]))
            at += size
