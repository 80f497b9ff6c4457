"""Raw model outputs of a background run, read off the runs' loops and recorded as the engine would.

Parsing runs on a thread, a long output in a worker process, under a timeout: past it the output
is answered ``parse_error`` and nothing of it runs. An output without a call to run is read once
more there, for the call ids to answer under, in the same trip: a huge hostile output costs one
worker's time, not two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actionspace.errors import ActionError
from actionspace.parse import ParseResult, call_ids, parse
from actionspace.runtime import Runtime
from actionspace.service.lanes import PROCESSES, off_loop
from actionspace.trace.store_encoding import bounded_raw
from actionspace.types import Observation

__all__ = ["calls_status", "parse_output", "parse_with_ids", "parsed_event", "read_output"]

_INLINE_PARSE_CHARS = 65_536
"""Raw outputs up to this size are parsed on a thread; longer ones in a worker process."""


async def read_output(
    rt: Runtime, raw: Any, run_id: str, *, timeout_s: float
) -> ParseResult | list[Observation]:
    """Parse ``raw`` and record it (``model_output``, ``parsed``): its calls to send, or the
    ``parse_error`` observations (recorded) of an output none of whose calls runs."""
    parsed: ParseResult | ActionError
    ids: tuple[str, ...]
    try:
        if _size(raw) <= _INLINE_PARSE_CHARS:
            parsed, ids = await off_loop(lambda: parse_with_ids(raw), timeout_s=timeout_s)
        else:
            parsed, ids = await PROCESSES.run(parse_with_ids, raw, timeout_s=timeout_s)
    except TimeoutError:
        parsed, ids = _timed_out(timeout_s), ()
    rt.record(run_id, "model_output", bounded_raw(raw, rt.artifacts))
    if isinstance(parsed, ActionError) or not _runs(parsed):
        return _unparsed(rt, run_id, parsed, ids)
    rt.record(run_id, "parsed", parsed_event(parsed))
    return parsed


def parse_with_ids(raw: Any) -> tuple[ParseResult, tuple[str, ...]]:
    """``parse(raw)``, and the call ids ``raw`` names when none of its calls runs (else ``()``):
    the one function a worker runs for an output."""
    parsed = parse(raw)
    return parsed, (() if _runs(parsed) else tuple(call_ids(raw)))


def _runs(parsed: ParseResult | ActionError) -> bool:
    """Whether ``parsed`` holds calls to send: parsed without an error, with at least one call."""
    return not isinstance(parsed, ActionError) and parsed.error is None and bool(parsed.calls)


async def parse_output(raw: Any, *, timeout_s: float) -> ParseResult | ActionError:
    """``parse(raw)`` off the runs' loops; a parse past ``timeout_s`` is a parse_error."""
    try:
        if _size(raw) <= _INLINE_PARSE_CHARS:
            return await off_loop(lambda: parse(raw), timeout_s=timeout_s)
        return await PROCESSES.run(parse, raw, timeout_s=timeout_s)
    except TimeoutError:
        return _timed_out(timeout_s)


def _timed_out(timeout_s: float) -> ActionError:
    return ActionError.of(
        "parse_error",
        f"parsing the output took longer than {timeout_s:g} s; emit a shorter output",
        details={"reason": "parse_timeout", "timeout_s": timeout_s},
    )


def _unparsed(
    rt: Runtime, run_id: str, parsed: ParseResult | ActionError, ids: Sequence[str]
) -> list[Observation]:
    """The parse_error observations of an output none of whose calls runs, as the engine
    answers and records it (``pipeline/calls.per_call_id``): one per call id the output gave
    (``ids``; an id given twice once), else one under ``<run id>:parse``, each with its
    ``observation`` event under that id."""
    if isinstance(parsed, ActionError):
        error, event = parsed, {"format": "unknown", "calls": [], "error": parsed.message[:300]}
    elif parsed.error is not None:
        error, event = parsed.error, {**parsed_event(parsed), "error": parsed.error.message[:300]}
    else:
        content = (parsed.content or "")[:200]
        error = ActionError.of(
            "parse_error",
            "the output contains no tool call",
            details={"format": parsed.format, "content": content},
        )
        event = parsed_event(parsed)
    rt.record(run_id, "parsed", event)
    observed = {
        "status": "error",
        "category": error.category,
        "recovery": list(error.recovery),
        "message": error.message[:300],
    }
    answered = dict.fromkeys(ids) or (f"{run_id}:parse",)
    for call_id in answered:
        rt.record(run_id, "observation", observed, call_id=call_id)
    return [Observation.failure(error, call_id=call_id, tool="") for call_id in answered]


def _size(raw: Any) -> int:
    """Characters of a raw text output (a structured one is already parsed JSON: cheap to read)."""
    return len(raw) if isinstance(raw, str) else 0


def parsed_event(parsed: ParseResult) -> dict[str, Any]:
    return {"format": parsed.format, "calls": [{"name": c.name, "id": c.id} for c in parsed.calls]}


def calls_status(statuses: Sequence[str]) -> str:
    """The status of a run of calls whose observations have ``statuses``."""
    if all(s == "ok" for s in statuses):
        return "ok"
    if all(s == "error" for s in statuses):
        return "error"
    return "partial"
