"""What a closed Runtime answers.

Every entry point used after ``Runtime.close()`` raises :class:`ConfigurationError` (misuse of the
API, DESIGN §4) before it touches a store. A call already running when the runtime closes ends as
a typed observation: a read ``cancelled``; a write that may have been sent ``unknown_commit``
unless its ledger entry still answers what happened. Before the stores close, the ledger entry of
every write still running is moved from ``dispatched`` to ``unknown``, with the reason noted, so no
entry is left ``dispatched`` behind a closed runtime (recovery or ``ledger resolve`` settles it).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from typing import NoReturn, Protocol

from actionspace.catalog.registry import Catalog
from actionspace.errors import CATEGORIES, ActionError, ConfigurationError
from actionspace.ledger.entries import LedgerStore
from actionspace.pipeline.runs import CLOSED
from actionspace.types import Observation

__all__ = ["closed_error", "ended_by_close", "note_cut_writes", "refuse_closed"]

_CUT = "the Runtime was closed while this call ran"
_DECIDED_BEFORE_SENDING = frozenset(CATEGORIES[: CATEGORIES.index("conflict")])
"""Errors the stages answer before a tool runs (DESIGN §4: the categories before ``conflict``):
they stay as they are after a close."""

_log = logging.getLogger("actionspace")


def closed_error() -> ConfigurationError:
    """The exception every entry point of a closed Runtime raises."""
    return ConfigurationError(CLOSED)


class Closing(Protocol):
    """What :func:`ended_by_close` reads of a Runtime."""

    catalog: Catalog
    ledger: LedgerStore


def refuse_closed() -> NoReturn:
    """Raise :func:`closed_error` (``rt._closed and refuse_closed()``: one attribute read per call)."""
    raise closed_error()


def ended_by_close(out: Sequence[Observation], rt: Closing, run_id: str) -> list[Observation]:
    """The observations of calls that were running when their runtime closed: what the stages
    refused stays; a write whose ledger entry still answers its outcome stays; any other write is
    ``unknown_commit``, any other read ``cancelled``. ``out`` empty (the call broke on a closed
    store before it had any): one ``cancelled`` observation."""
    if not out:
        return [Observation.failure(ActionError.of("cancelled", _CUT), call_id=f"{run_id}:closed", tool="")]
    return [_ended(obs, rt.catalog, rt.ledger) for obs in out]


def _ended(obs: Observation, catalog: Catalog, ledger: LedgerStore) -> Observation:
    if obs.error is not None and obs.error.category in _DECIDED_BEFORE_SENDING:
        return obs
    spec = catalog.current(obs.tool)
    if spec is None or not spec.has_side_effects:
        error = ActionError.of("cancelled", _CUT)
        return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)
    key = obs.diagnostics.get("idempotency_key")
    if isinstance(key, str) and _settled_as_answered(obs, ledger, key):
        return obs
    if obs.error is not None and obs.error.category == "unknown_commit":
        return obs
    error = ActionError.of(
        "unknown_commit",
        f"{_CUT}; the write may have committed",
        resource_ids=(key,) if isinstance(key, str) else (),
        details={"idempotency_key": key} if isinstance(key, str) else {},
    )
    return Observation.failure(error, call_id=obs.call_id, tool=obs.tool, tool_version=obs.tool_version)


def _settled_as_answered(obs: Observation, ledger: LedgerStore, key: str) -> bool:
    """The ledger (when it can still be read) holds the outcome ``obs`` reports."""
    try:
        entry = ledger.get(key)
    except Exception:  # the store is closed: nothing confirms the outcome
        return False
    if entry is None:
        return False
    return entry.state == ("committed" if obs.error is None else "failed")


def note_cut_writes(ledger: LedgerStore, keys: Collection[str]) -> None:
    """Move the entries of writes still running from ``dispatched`` to ``unknown``, noting that the
    runtime closed under them (a write that settled meanwhile is left as it settled)."""
    error = ActionError.of("unknown_commit", f"{_CUT}; the write may have committed").to_dict()
    for key in list(keys):
        try:
            entry = ledger.get(key)
            if entry is not None and entry.state == "dispatched":
                ledger.transition(key, ("dispatched",), entry.evolve(state="unknown", error=error))
        except Exception:  # a store already failing: recovery settles the entry from ``dispatched``
            _log.exception("actionspace: the write %s cut by close() could not be noted unknown", key)
