"""Ledger entries as a viewer may see them: redacted by the labels their run's trace carries.

A ledger entry holds a call's arguments, observation and error, but no label of its own. The run's
trace does: while a run's context label is secret (or has a reader set), every event it records
carries that label (see :mod:`actionspace.policy.redaction`). The context label only grows during a
run, so an entry of a run whose trace carries any label the viewer may not read is shown with its
values replaced by :data:`~actionspace.policy.redaction.REDACTED` (a few entries too many rather
than one too few); ids, states, tool, digest and timestamps stay so the entry still reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from actionspace.ledger.entries import LedgerEntry
from actionspace.policy.labels import may_read
from actionspace.policy.principal import Principal
from actionspace.policy.redaction import REDACTED, mark_of
from actionspace.trace.events import TraceStore

__all__ = ["hidden_runs", "redact_entry", "visible_entries"]

_ERROR_KEPT = frozenset({"category", "retryable", "retry_after", "recovery", "vendor_code"})
_OBSERVATION_KEPT = frozenset({"call_id", "tool", "tool_version", "status", "complete", "content_hash"})


def hidden_runs(trace: TraceStore, run_ids: Iterable[str], viewer: Principal | None) -> set[str]:
    """The runs among ``run_ids`` whose trace carries a label ``viewer`` may not read."""
    hidden: set[str] = set()
    for run_id in dict.fromkeys(run_ids):
        for event in trace.events(run_id):
            label = mark_of(event.data)
            if label is not None and not may_read(label, viewer):
                hidden.add(run_id)
                break
    return hidden


def redact_entry(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ledger entry's ``to_dict()`` with every value-bearing field redacted."""
    out = dict(data)
    arguments = data.get("arguments")
    out["arguments"] = {name: REDACTED for name in arguments} if isinstance(arguments, Mapping) else {}
    observation = data.get("observation")
    if isinstance(observation, Mapping):
        out["observation"] = {k: v for k, v in observation.items() if k in _OBSERVATION_KEPT}
        out["observation"]["data"] = REDACTED
    error = data.get("error")
    if isinstance(error, Mapping):
        out["error"] = {k: v for k, v in error.items() if k in _ERROR_KEPT}
        out["error"]["message"] = REDACTED
    if data.get("remote_id") is not None:
        out["remote_id"] = REDACTED
    resolution = data.get("resolution")
    if isinstance(resolution, Mapping):
        out["resolution"] = {**resolution, "reason": REDACTED}
    return out


def visible_entries(
    entries: Iterable[LedgerEntry], trace: TraceStore, viewer: Principal | None
) -> list[dict[str, Any]]:
    """Each entry's ``to_dict()``, redacted where its run holds what ``viewer`` may not read."""
    listed = list(entries)
    hidden = hidden_runs(trace, (e.run_id for e in listed), viewer)
    return [redact_entry(e.to_dict()) if e.run_id in hidden else e.to_dict() for e in listed]
