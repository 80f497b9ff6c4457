"""The intent of a side-effecting action: its first entry, and the one durable write before its send.

Shared by the commit protocol (:func:`actionspace.ledger.commit.protocol`) and the ledger driver's
direct frame for a new write (``actionspace.pipeline.commit``), so that both write the intent, and
answer a store that refuses it, the same way.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Mapping
from typing import Any, cast

from actionspace._crash import point
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, StoreClosedError, said_safely
from actionspace.ledger.entries import BeginsUnlessPending, Begun, LedgerEntry, LedgerStore
from actionspace.ledger.keys import args_digest
from actionspace.types import Observation

__all__ = ["intent", "new_entry", "not_begun"]


def intent(
    store: LedgerStore,
    sent: LedgerEntry,
    still_pending: Callable[[LedgerEntry], Observation] | None,
    fail: Callable[[ActionError], Observation],
) -> Begun | Observation:
    """Write ``sent`` (``dispatched``, one attempt) unless its node has an entry already.

    The final observation instead when the store raised (``transient``, nothing sent:
    :func:`not_begun`) or, with ``still_pending`` (then ``store`` is :class:`BeginsUnlessPending`), an
    unsettled identical action of the run under another key was found in the insert's own
    transaction.
    """
    try:
        if still_pending is not None:
            begun = cast(BeginsUnlessPending, store).begin_unless_pending(sent)
            if begun.pending is not None:
                return still_pending(begun.pending)
        else:
            begun = store.begin(sent)
    except Exception as exc:  # the store did not take the intent (locked, full, gone): nothing is sent
        return fail(not_begun(store, sent, exc))
    point("after_intent")
    return begun


def not_begun(store: LedgerStore, sent: LedgerEntry, exc: Exception) -> ActionError:
    """The error of an intent whose write raised ``exc``; nothing is sent either way.

    A driver's error (the database refused the write, locked, full, gone) or a closed store wrote
    nothing: ``transient``, "could not record". Any other exception may have come after the write
    landed: a signal handler's (an alarm's timeout error) lands as a call begins or returns, so as
    the ``COMMIT``, the sync after it or an autocommitted insert returns too. The ledger is asked
    for the entry then: held, the answer says the intent was recorded and not sent, and that the
    next proposal of the action settles it (``transient``, retry with the same key: that proposal
    finds the entry and settles it as recovery does, never sending it blindly); not held, that
    nothing was recorded; the read failing too, that it may have been."""
    if _driver_error(exc):
        return ActionError.unsent("the ledger could not record the intent", exc)
    why = f"{type(exc).__name__}: {said_safely(exc, 200)}"
    try:
        stored = store.get(sent.key)
    except Exception:  # cut again, or the store failing now: whether it is recorded is not known
        found = "its intent may have been recorded"
    else:
        if stored is None:
            return ActionError.unsent("the ledger could not record the intent", exc)
        found = "its intent was recorded"
    message = f"the intent's write was cut short ({why}); {found}; it was not sent; the next proposal "
    details = {"sent": False, "idempotency_key": sent.key}
    return ActionError.of("transient", message + "of this action settles it", details=details)


def _driver_error(exc: Exception) -> bool:
    """Whether ``exc`` is a store's driver refusing the write (SQLite's, PostgreSQL's: nothing of a
    statement that raised is written) or a closed store's."""
    if isinstance(exc, sqlite3.Error | StoreClosedError):
        return True
    psycopg = sys.modules.get("psycopg")  # loaded only where a PostgreSQL store is in use
    return psycopg is not None and isinstance(exc, psycopg.Error)


def new_entry(
    *,
    key: str,
    run_id: str,
    node_id: str,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    digest: str | None = None,
    dispatched: bool = False,
) -> LedgerEntry:
    """An ``accepted`` entry; ``digest`` is ``args_digest(arguments)`` when the caller has it.

    ``dispatched``: the entry as the intent writes it (``dispatched``, one attempt), made at once
    rather than as a copy of the ``accepted`` one."""
    return LedgerEntry(
        key=key,
        run_id=run_id,
        node_id=node_id,
        tool=spec.key,
        args_digest=args_digest(arguments) if digest is None else digest,
        arguments=dict(arguments),
        state="dispatched" if dispatched else "accepted",
        attempts=1 if dispatched else 0,
    )
