"""The intent of a side-effecting action: its first entry, and the one durable write before its send.

Shared by the commit protocol (:func:`actionspace.ledger.commit.protocol`) and the ledger driver's
direct frame for a new write (``actionspace.pipeline.commit``), so that both write the intent, and
answer a store that refuses it, the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from actionspace._crash import point
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.ledger.entries import BeginsUnlessPending, Begun, LedgerEntry, LedgerStore
from actionspace.ledger.keys import args_digest
from actionspace.types import Observation

__all__ = ["intent", "new_entry"]


def intent(
    store: LedgerStore,
    sent: LedgerEntry,
    still_pending: Callable[[LedgerEntry], Observation] | None,
    fail: Callable[[ActionError], Observation],
) -> Begun | Observation:
    """Write ``sent`` (``dispatched``, one attempt) unless its node has an entry already.

    The final observation instead when nothing is written: the store failed (``transient``,
    nothing sent) or, with ``still_pending`` (then ``store`` is :class:`BeginsUnlessPending`), an
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
        return fail(ActionError.unsent("the ledger could not record the intent", exc))
    point("after_intent")
    return begun


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
