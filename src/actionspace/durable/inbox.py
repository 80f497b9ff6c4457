"""Whether a plan workflow has a message waiting, asked without a checkpoint when it has none.

A plan looks for its messages (cancels, and the final observations of its nodes' child workflows)
before every wave. ``DBOS.recv`` does that durably even when it does not wait: it records a sleep
and its answer (two checkpoints, about ten statements), and most plans are never sent anything.
So :meth:`Inbox.waiting` first asks the DBOS message table, in one statement that writes nothing,
whether an unconsumed message is there; only then does the plan read it with ``recv``.

DBOS numbers a workflow's operations in the order they start, and a workflow run again must start
the same ones: a look that found nothing started no operation, so when the workflow is replayed
(resumed on another worker) that look must start none either, whatever has arrived since. The
operations the workflow recorded before are read at its first look; while it replays them, they
decide (a ``DBOS.recv`` recorded there: read; anything else: do not), and the table decides after.
The plan looks this way only while none of its nodes waits in a child workflow (then a look that
found nothing may be followed by the wait for a child, a ``recv`` at the same id, and the record
could not tell the two apart); otherwise it reads with ``recv`` as before.

The statements read DBOS's own tables (``operation_outputs`` and ``notifications``, DBOS 3, in
``DurableConfig.system_schema``) through the heartbeat's pool.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import psycopg
from psycopg import sql

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

__all__ = ["Inbox", "next_operation"]

RECV: Final = "DBOS.recv"
SLEEP: Final = "DBOS.sleep"
"""The operations DBOS records for one ``recv``: the read (its id) and the sleep of its timeout (the next)."""
FIRST_LOOK_RETRY_S: Final = 600.0
"""Longest (seconds) a workflow's first look asks a failing database again before it raises."""
RETRY_FIRST_S: Final = 0.1
RETRY_MAX_S: Final = 5.0
"""First and longest wait (seconds) between two tries of a first look; it doubles."""

_FIRST_LOOK: Final = """
SELECT function_id, function_name FROM {schema}.operation_outputs WHERE workflow_uuid = %(workflow)s
UNION ALL
SELECT -1, NULL WHERE EXISTS ({waiting})
"""
_WAITING: Final = (
    "SELECT 1 FROM {schema}.notifications"
    " WHERE destination_uuid = %(workflow)s AND topic = %(topic)s AND NOT consumed"
)


def next_operation() -> int:
    """The DBOS id of the next operation the running workflow will start."""
    from dbos._context import get_local_dbos_context

    ctx = get_local_dbos_context()
    if ctx is None or not ctx.is_workflow():
        raise RuntimeError("not inside a DBOS workflow")
    return int(ctx.function_id) + 1


class Inbox:
    """The messages of one workflow on one topic, as :meth:`waiting` sees them.

    Blocking (one statement on ``pool``): call :meth:`waiting` off the event loop.
    """

    def __init__(
        self, pool: ConnectionPool[psycopg.Connection[Any]], schema: str, workflow_id: str, topic: str
    ) -> None:
        self._pool = pool
        self._params = {"workflow": workflow_id, "topic": topic}
        waiting = sql.SQL(_WAITING).format(schema=sql.Identifier(schema))
        self._waiting = sql.SQL("SELECT EXISTS ({waiting})").format(waiting=waiting)
        self._first = sql.SQL(_FIRST_LOOK).format(schema=sql.Identifier(schema), waiting=waiting)
        self._recorded: dict[int, str] | None = None
        """Function id → name of the operations recorded before this run of the workflow."""
        self._last = -1

    def waiting(self, operation: int) -> bool:
        """True when the workflow is to read a message now, ``operation`` being the id its read
        would take: while it replays, as its first run decided; after, when one is there."""
        if self._recorded is None:
            found, recorded = self._first_look()
        else:
            found, recorded = None, self._recorded
        if operation <= self._last:
            name = recorded.get(operation)
            if name is None:  # cut short between the read's sleep and the read: it reads again
                return recorded.get(operation + 1) == SLEEP
            return name == RECV
        return self._look() if found is None else found

    def _first_look(self) -> tuple[bool, dict[int, str]]:
        """(a message waits, the operations recorded so far), in one statement. Without the
        record no look can be decided, so a failing database is asked again, as DBOS waits for
        it, up to :data:`FIRST_LOOK_RETRY_S` (then the error is raised)."""
        delay, deadline = RETRY_FIRST_S, time.monotonic() + FIRST_LOOK_RETRY_S
        while True:
            try:
                with self._pool.connection() as conn:
                    rows = conn.execute(self._first, self._params).fetchall()
                break
            except psycopg.Error:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, RETRY_MAX_S)
        recorded = self._recorded = {int(i): str(name) for i, name in rows if i >= 0}
        self._last = max(recorded, default=-1)
        return any(i < 0 for i, _ in rows), recorded

    def _look(self) -> bool:
        """A look after the record: when the database fails it, the workflow reads (``recv``
        waits for the database as DBOS does, and its read is recorded like any other)."""
        try:
            with self._pool.connection() as conn:
                row = conn.execute(self._waiting, self._params).fetchone()
        except psycopg.Error:
            return True
        return bool(row and row[0])
