"""The secondary index of the SQLite ledger table, the lookups it answers, and the move of a file
made with the earlier two indexes.

Each B-tree an entry sits in is a page the intent's fsync'd transaction writes to the WAL (and the
outcome's, when a column it changes is indexed). Besides the table and its two unique constraints
(``key``; ``(run_id, node_id)``) the ledger keeps one index, ``ledger_entries_state``: ``(g, r, t,
d, updated_at)``, where ``g`` is the entry's state, or ``dispatched`` for any unsettled state
(``dispatched``, ``unknown``, ``unknown_commit``), and ``r``, ``t``, ``d`` are its ``run_id``,
``tool`` and ``args_digest`` while it is unsettled, NULL otherwise. It answers, each by a seek:

- the check for an unsettled identical action of a run (``g``, then the action);
- the entries of a settled state by recency (``list``, ``purge``: ``g``, three NULLs, then
  ``updated_at``), and those of an unsettled state among the few unsettled entries (recovery).

The earlier layout had ``(state, updated_at)`` and ``(run_id, tool, args_digest)``: an intent wrote
both, the second at a place its random digest chose. An intent now writes one index entry, among
the few unsettled ones; its outcome moves it to the end of its settled state, right before them
(``committed`` sorts just before ``dispatched``), usually on the same page, as the earlier state
index did.

A file with the earlier indexes is given the new one by the schema's ``CREATE INDEX IF NOT
EXISTS`` and loses the earlier two in one write transaction (:func:`adopt`), safe against
processes opening it at once. The table is unchanged, so an earlier version still reads and
writes the file (it makes its two indexes again when it opens it; the next open here drops them).
"""

from __future__ import annotations

import sqlite3
from typing import Final

from actionspace.ledger._connections import SqliteConnections
from actionspace.ledger.entries import TERMINAL, UNSETTLED

__all__ = ["INDEX", "PENDING_WHERE", "PURGED_WHERE", "UNSETTLED_SQL", "adopt", "listed_where"]

UNSETTLED_SQL: Final = "(" + " OR ".join(f"state = '{state}'" for state in sorted(UNSETTLED)) + ")"
"""True of an unsettled entry."""
_GROUP: Final = f"CASE WHEN {UNSETTLED_SQL} THEN 'dispatched' ELSE state END"
"""An entry's place in the index: its state, or ``dispatched`` for each unsettled state (they are
sought together, by one equality; ``dispatched`` sorts right after ``committed``, the end of which
is where an outcome moves the entry: usually the same page)."""
_ACTION: Final = tuple(
    f"CASE WHEN {UNSETTLED_SQL} THEN {column} END" for column in ("run_id", "tool", "args_digest")
)
"""An unsettled entry's run, tool and arguments digest; NULL for any other. A query spells these
expressions as the index does, or SQLite does not seek them."""

INDEX: Final = (
    "CREATE INDEX IF NOT EXISTS ledger_entries_state"
    f" ON ledger_entries ({_GROUP}, {', '.join(_ACTION)}, updated_at)"
)
PENDING_WHERE: Final = f"WHERE {_GROUP} = 'dispatched' AND {' = ? AND '.join(_ACTION)} = ?"
"""The unsettled entries of a run's action (parameters: run, tool, digest): one seek."""
_SETTLED: Final = " AND ".join(f"{expression} IS NULL" for expression in _ACTION)
"""True of every entry not unsettled: a settled state's entries are then read in ``updated_at`` order."""
PURGED_WHERE: Final = (
    f"WHERE {_GROUP} IN (" + ", ".join(f"'{state}'" for state in sorted(TERMINAL)) + f") AND {_SETTLED}"
)
"""The committed and failed entries, by a seek per state (followed by a bound on ``updated_at``)."""


def listed_where(state: str) -> str:
    """The ``WHERE`` of a listing of ``state`` (one parameter, the state): a settled state's
    entries by a seek in ``updated_at`` order; an unsettled one's among the few unsettled entries."""
    if state in UNSETTLED:  # ``+state``: SQLite would put the state into the index's expressions
        return f"WHERE {_GROUP} = 'dispatched' AND +state = ?"
    return f"WHERE {_GROUP} = ? AND {_SETTLED}"


_EARLIER: Final = ("ledger_entries_state_updated", "ledger_entries_action")


def adopt(db: SqliteConnections) -> None:
    """Drop the earlier layout's indexes from the file when it has any (the schema made the new one).

    Read first, so a file without them is not written to; dropped with ``IF EXISTS`` in one write
    transaction, so processes opening the file at once each find it done or do it.
    """
    if not _earlier(db.conn()):
        return
    with db.write() as conn:
        for name in _EARLIER:
            conn.execute(f"DROP INDEX IF EXISTS {name}")


def _earlier(conn: sqlite3.Connection) -> bool:
    marks = ", ".join("?" * len(_EARLIER))
    sql = f"SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ({marks})"
    return bool(conn.execute(sql, _EARLIER).fetchone()[0])
