"""Tools for worker-kill tests: each SIGKILLs its own worker once, at a chosen moment of its call.

``--tools tests.durable.crash_tools:register`` gives a worker the sweep tools plus:

* ``crash_native`` (``native``), ``crash_query`` (``query``), ``crash_none`` (``none``): store the
  effect, then kill the worker before the call returns (the ledger holds the action ``dispatched``;
  the wave's checkpoint is never written);
* ``crash_first`` (``native``): kill the worker as the call begins, before any effect.

Each kills only on its first call for a ``ref`` (noted in ``crash_marks`` first), so the worker that
takes over runs the plan on. Effects go to ``sweep_effects`` under the kind ``crash``.
"""

from __future__ import annotations

import os
import signal
import time
from typing import TYPE_CHECKING, Any

import psycopg

from actionspace.durable import sweep_tools
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

_url = ""
SCHEMA = {
    "type": "object",
    "properties": {"ref": {"type": "string"}, "value": {"type": "integer"}},
    "required": ["ref", "value"],
    "additionalProperties": False,
}
KILL_AFTER_S = 0.5
"""Pause before a kill after the effect, so the other nodes of the wave commit first."""


def prepare(url: str) -> None:
    sweep_tools.prepare(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS crash_marks (ref text PRIMARY KEY)")
        conn.execute("TRUNCATE crash_marks")


def _first_time(conn: psycopg.Connection[Any], ref: str) -> bool:
    return conn.execute("INSERT INTO crash_marks VALUES (%s) ON CONFLICT DO NOTHING", (ref,)).rowcount == 1


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)  # the signal lands before this returns


def _write_then_die(ref: str, value: int, key: str | None) -> dict[str, Any]:
    with psycopg.connect(_url) as conn, conn.transaction():
        fresh = key is None or (
            conn.execute(
                "INSERT INTO sweep_native_keys (key) VALUES (%s) ON CONFLICT DO NOTHING", (key,)
            ).rowcount
            == 1
        )
        if fresh:
            conn.execute(
                "INSERT INTO sweep_effects (kind, ref, value, at) VALUES ('crash', %s, %s, %s)",
                (ref, value, time.time()),
            )
        first = _first_time(conn, ref)
    if first:
        time.sleep(KILL_AFTER_S)
        _die()
    return {"ref": ref, "value": value + 1}


def crash_native(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
    return _write_then_die(ref, value, idempotency_key)


def crash_query(ref: str, value: int) -> dict[str, Any]:
    return _write_then_die(ref, value, None)


def crash_none(ref: str, value: int) -> dict[str, Any]:
    return _write_then_die(ref, value, None)


def crash_status(*, key: str, arguments: dict[str, Any]) -> StatusAnswer:
    with psycopg.connect(_url) as conn:
        row = conn.execute(
            "SELECT value FROM sweep_effects WHERE kind = 'crash' AND ref = %s LIMIT 1", (arguments["ref"],)
        ).fetchone()
    return NotCommitted() if row is None else Committed({"ref": arguments["ref"], "value": int(row[0]) + 1})


def crash_first(ref: str, value: int, idempotency_key: str) -> dict[str, Any]:
    with psycopg.connect(_url, autocommit=True) as conn:
        if _first_time(conn, ref):
            _die()
    return _write_then_die(f"{ref}", value, idempotency_key)


def register(rt: Runtime) -> None:
    global _url
    _url = rt.store_url
    sweep_tools.register(rt)
    common: dict[str, Any] = {"effect": "write", "writes": ["crash:{ref}"], "input_schema": SCHEMA}
    rt.add_tool(name="crash_native", fn=crash_native, idempotency="native", **common)
    rt.add_tool(name="crash_query", fn=crash_query, idempotency="query", status_query=crash_status, **common)
    rt.add_tool(name="crash_none", fn=crash_none, idempotency="none", **common)
    rt.add_tool(name="crash_first", fn=crash_first, idempotency="native", **common)
