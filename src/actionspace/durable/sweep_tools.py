"""Tools of the durable crash sweep: each writes to its own PostgreSQL table, with lost responses.

Three kinds, one per idempotency contract (DESIGN §3):

* ``native_write`` dedupes by our idempotency key (a key table in the same transaction);
* ``query_write`` has a status query by its business key ``ref``;
* ``none_write`` has neither;
* ``approved_write`` is ``native`` and needs a person's approval.

Effects land in ``sweep_effects`` without any unique constraint, so a second send of one action
shows up as a second row: duplicates are counted, never hidden. A seeded share of first sends
loses its response after the commit (``ToolError("unknown_commit")``); for ``none_write`` the
loss is noted in ``sweep_faults`` in the same transaction as the effect, so the sweep knows which
ambiguities must be reported as ``unknown_commit``. Sleeps around the commit let a SIGKILL land
mid-call.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg_pool import ConnectionPool

from actionspace.errors import ToolError
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["FAULT_RATE", "KINDS", "TOOLS", "fault", "prepare", "register"]

KINDS: Final = ("native", "query", "none")
TOOLS: Final = {"native": "native_write", "query": "query_write", "none": "none_write"}
FAULT_RATE: Final = 0.1
"""Share of actions whose first response is lost (chosen by a hash of the action's ``ref``)."""

TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS sweep_effects (id bigserial PRIMARY KEY, kind text NOT NULL,"
    " ref text NOT NULL, value bigint NOT NULL, at double precision NOT NULL)",
    "CREATE TABLE IF NOT EXISTS sweep_native_keys (key text PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS sweep_faults (kind text NOT NULL, ref text NOT NULL)",
)

_pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] | None = None
_pool_lock = threading.Lock()
_SCHEMA: Final = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
    "required": ["ref", "value"],
    "additionalProperties": False,
}


def fault(ref: str) -> bool:
    """True when the first response of the action ``ref`` is to be lost."""
    digest = hashlib.sha256(ref.encode()).digest()
    return int.from_bytes(digest[:4], "big") < FAULT_RATE * 2**32


def prepare(url: str) -> None:
    """Create the sweep's tables (empty them if they exist)."""
    with psycopg.connect(url, autocommit=True) as conn:
        for ddl in TABLES:
            conn.execute(ddl)
        conn.execute("TRUNCATE sweep_effects, sweep_native_keys, sweep_faults")


def register(rt: Runtime) -> None:
    """Register the three sweep tools on ``rt``, writing to the database of ``rt.store_url``."""
    global _pool
    with _pool_lock:
        if _pool is not None and _pool.conninfo != rt.store_url:
            _pool.close()
            _pool = None
        if _pool is None:
            _pool = ConnectionPool(rt.store_url, min_size=1, max_size=4, open=True)
    common: dict[str, Any] = {"effect": "write", "writes": ["sweep:{ref}"], "input_schema": _SCHEMA}
    rt.add_tool(name="native_write", fn=native_write, idempotency="native", **common)
    rt.add_tool(name="query_write", fn=query_write, idempotency="query", status_query=query_status, **common)
    rt.add_tool(name="none_write", fn=none_write, idempotency="none", **common)
    rt.add_tool(
        name="approved_write", fn=approved_write, idempotency="native", requires_approval=True, **common
    )


def _db() -> ConnectionPool[psycopg.Connection[tuple[Any, ...]]]:
    if _pool is None:
        raise RuntimeError("the sweep tools were not registered")
    return _pool


def _pause() -> None:
    time.sleep(random.uniform(0.002, 0.02))


def _insert(conn: psycopg.Connection[tuple[Any, ...]], kind: str, ref: str, value: int) -> None:
    conn.execute(
        "INSERT INTO sweep_effects (kind, ref, value, at) VALUES (%s, %s, %s, %s)",
        (kind, ref, value, time.time()),
    )


def native_write(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
    _pause()
    with _db().connection() as conn, conn.transaction():
        fresh = conn.execute(
            "INSERT INTO sweep_native_keys (key) VALUES (%s) ON CONFLICT DO NOTHING", (idempotency_key,)
        ).rowcount
        if fresh:
            _insert(conn, "native", ref, value)
    _pause()
    if fresh and fault(ref):
        raise ToolError("unknown_commit", "the response was lost")
    return {"ref": ref, "value": value + 1}


def approved_write(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
    """Like ``native_write`` (without lost responses); the tool needs a person's approval."""
    with _db().connection() as conn, conn.transaction():
        fresh = conn.execute(
            "INSERT INTO sweep_native_keys (key) VALUES (%s) ON CONFLICT DO NOTHING", (idempotency_key,)
        ).rowcount
        if fresh:
            _insert(conn, "approved", ref, value)
    return {"ref": ref, "value": value + 1}


def query_write(ref: str, value: int) -> dict[str, Any]:
    _pause()
    with _db().connection() as conn, conn.transaction():
        _insert(conn, "query", ref, value)
        (count,) = conn.execute(
            "SELECT count(*) FROM sweep_effects WHERE kind = 'query' AND ref = %s", (ref,)
        ).fetchone() or (0,)
    _pause()
    if count == 1 and fault(ref):
        raise ToolError("unknown_commit", "the response was lost")
    return {"ref": ref, "value": value + 1}


def query_status(*, key: str, arguments: dict[str, Any]) -> StatusAnswer:
    with _db().connection() as conn:
        row = conn.execute(
            "SELECT value FROM sweep_effects WHERE kind = 'query' AND ref = %s LIMIT 1", (arguments["ref"],)
        ).fetchone()
    if row is None:
        return NotCommitted()
    return Committed({"ref": arguments["ref"], "value": int(row[0]) + 1})


def none_write(ref: str, value: int) -> dict[str, Any]:
    _pause()
    lose = fault(ref)
    with _db().connection() as conn, conn.transaction():
        _insert(conn, "none", ref, value)
        if lose:
            conn.execute("INSERT INTO sweep_faults (kind, ref) VALUES ('none', %s)", (ref,))
    _pause()
    if lose:
        raise ToolError("unknown_commit", "the response was lost")
    return {"ref": ref, "value": value + 1}
