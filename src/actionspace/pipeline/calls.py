"""Around the stages: a model's raw output into calls, the dispatched event, grouped observations."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.parse import ParseResult, call_ids, parse
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import bounded_raw
from actionspace.types import Observation, ObservationStatus, ToolCall

__all__ = ["dispatched_event", "group", "parse_raw", "per_call_id", "well_identified"]


def parse_raw(
    raw: Any, rec: Recorder, artifacts: Any = None, parsed: ParseResult | None = None
) -> list[ToolCall] | Observation:
    """The calls in ``raw``, or the parse_error observation; a long raw output is recorded bounded
    (a prefix and its sha256 in the trace, the whole in ``artifacts`` when given). ``parsed``:
    ``parse(raw)``, when the caller has it already."""
    if isinstance(raw, ToolCall) and well_identified(raw):
        rec.add("parsed", {"format": "toolcall", "calls": ({"name": raw.name, "id": raw.id},)})
        return [raw]
    rec.add("model_output", bounded_raw(raw, artifacts))
    if parsed is None:
        parsed = parse(raw)
    event: dict[str, Any] = {
        "format": parsed.format,
        "calls": tuple({"name": c.name, "id": c.id} for c in parsed.calls),
    }
    error = parsed.error
    if error is not None:
        event["error"] = error.message[:300]
    elif not parsed.calls:
        content = (parsed.content or "")[:200]
        error = ActionError.of(
            "parse_error",
            "the output contains no tool call",
            details={"format": parsed.format, "content": content},
        )
    rec.add("parsed", event)
    if error is not None:
        rec.add(
            "observation", {"status": "error", "category": "parse_error", "recovery": list(error.recovery)}
        )
        return Observation.failure(error, call_id=f"{rec.run.run_id}:parse", tool="")
    return list(parsed.calls)


def well_identified(raw: Any) -> bool:
    """False for a ``ToolCall`` whose id is neither None nor text: only :func:`parse` may read it
    (a ``parse_error``), never a path that takes the call as it is."""
    return not isinstance(raw, ToolCall) or raw.id is None or type(raw.id) is str


def per_call_id(raw: Any, failure: Observation) -> list[Observation]:
    """The ``parse_error`` :func:`parse_raw` made of ``raw``, once per call id the message gave.

    None of such a message's calls runs, but the provider wants a result for each call id of the
    message before its next request: each id gets the error (in the message's order). Output
    without call ids (raw text, a message that holds no call) keeps the one observation.
    """
    ids = call_ids(raw)
    if not ids:
        return [failure]
    return [dataclasses.replace(failure, call_id=call_id) for call_id in ids]


def dispatched_event(ready: Ready, spec: ToolSpec) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tool": spec.name,
        "version": spec.version,
        "node_id": ready.node_id,
        "attempt": 1,
    }
    if ready.key is not None:
        data["idempotency_key"] = ready.key
    return data


def group(items: Sequence[Observation], run_id: str) -> Observation:
    failed = sum(1 for o in items if o.status == "error")
    status: ObservationStatus = "ok" if failed == 0 else ("error" if failed == len(items) else "partial")
    return Observation(
        call_id=f"{run_id}:group",
        tool="*",
        status=status,
        error=_all_failed(items) if status == "error" else None,
        items=tuple(items),
        complete=all(o.complete for o in items),
        diagnostics={"failed": [o.call_id for o in items if o.status == "error"]},
    )


def _all_failed(items: Sequence[Observation]) -> ActionError:
    """The error of a group none of whose calls succeeded (an error observation always carries its
    error): the first call's category and recovery, every call's category in ``details``."""
    errors = [o.error for o in items if o.error is not None]
    failed = {o.call_id: o.error.category if o.error is not None else "unclassified" for o in items}
    first = errors[0] if errors else ActionError.of("unclassified", "no call answered")
    return ActionError.of(
        first.category,
        f"none of the {len(items)} calls succeeded; the first: {first.message[:300]}",
        details={"failed": failed},
    )
