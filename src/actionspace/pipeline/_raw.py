"""A model's raw output into calls (:func:`parse_raw`), and the answers of a message none of whose
calls runs because it did not parse (:func:`per_call_id`): one per call id the message gave, or
one per call position of a Gemini message, which wants every call of the turn answered."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.parse import ParseResult, call_ids, parse
from actionspace.trace.recorder import Recorder
from actionspace.trace.store_encoding import bounded_raw
from actionspace.types import Observation, ToolCall

__all__ = ["parse_raw", "per_call_id", "per_position", "positioned", "well_identified"]


def parse_raw(
    raw: Any, rec: Recorder, artifacts: Any = None, parsed: ParseResult | None = None
) -> list[ToolCall] | Observation:
    """The calls in ``raw``, or the parse_error observation to answer with :func:`per_call_id` (which
    records it); a long raw output is recorded bounded (a prefix and its sha256 in the trace, the
    whole in ``artifacts`` when given). ``parsed``: ``parse(raw)``, when the caller has it already."""
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
        return Observation.failure(error, call_id=f"{rec.run.run_id}:parse", tool="")
    return list(parsed.calls)


def well_identified(raw: Any) -> bool:
    """False for a ``ToolCall`` whose name is not text or whose id is neither None nor text: only
    :func:`parse` may read it (a ``parse_error``), never a path that takes the call as it is."""
    return not isinstance(raw, ToolCall) or (
        type(raw.name) is str and (raw.id is None or type(raw.id) is str)
    )


def per_call_id(
    raw: Any, failure: Observation, rec: Recorder, parsed: ParseResult | None = None
) -> list[Observation]:
    """The ``parse_error`` :func:`parse_raw` made of ``raw``, once per call id the message gave,
    each id answered recorded in ``rec`` (one ``observation`` event under it).

    None of such a message's calls runs, but the provider wants a result for each call id of the
    message before its next request: each id gets the error (in the message's order). The ids are
    those ``raw`` holds, else those ``parsed`` still knows (a ``ParseResult`` handed over as its
    ``to_dict()``). Output without call ids (raw text, a message that holds no call) keeps the one
    observation, under ``<run id>:parse``, unless the error names the message's calls in order
    (a Gemini message, whose calls may carry no ids): then each call position is answered
    (:func:`per_position`). Else an id given to several calls is answered, and recorded, once:
    the trace holds what the model reads.
    """
    ids = call_ids(raw) or (call_ids(parsed) if parsed is not None else ())
    if positioned(failure, ids):
        ids = ()
    out = (
        [dataclasses.replace(failure, call_id=call_id) for call_id in ids]
        if ids
        else per_position(failure, rec)
    )
    error = failure.error
    assert error is not None
    event = {
        "status": "error",
        "category": error.category,
        "recovery": list(error.recovery),
        "message": error.message[:300],
    }
    own = rec.call_id
    try:
        for call_id in dict.fromkeys(o.call_id for o in out):
            rec.call_id = call_id
            rec.add("observation", event)
    finally:
        rec.call_id = own
    return out


_MAX_POSITIONS = 512


def positioned(failure: Observation, ids: Collection[str] = ()) -> bool:
    """Whether ``failure``'s error names each call of the message in order, with the id of each
    (``details["function_calls"]`` and ``details["function_call_ids"]``: a Gemini message, which
    wants every call answered, by id or by position), every one of ``ids`` (those the message
    holds) among them."""
    details = failure.error.details if failure.error is not None else {}
    named, given = details.get("function_calls"), details.get("function_call_ids")
    if not (isinstance(named, list) and named and isinstance(given, list) and len(given) == len(named)):
        return False
    return not ids or set(ids) <= set(given)


def per_position(failure: Observation, rec: Recorder) -> list[Observation]:
    """``failure`` once per call its error names in order (``details["function_calls"]``; as many
    as a parse names, a ``ParseResult`` handed in may name more), each naming that call's function:
    under the call's own id (``details["function_call_ids"]``) when it has one, else under an id
    the run gives it (``<run id>:n<k>``, never one the message holds); ``[failure]`` when none is
    named. An id given to several calls names the function of the first (it is answered once)."""
    error = failure.error
    named = error.details.get("function_calls") if error is not None else None
    run = rec.run
    if error is None or not isinstance(named, list) or not named or not isinstance(run, RunState):
        return [failure]
    given = error.details["function_call_ids"] if positioned(failure) else [None] * len(named)
    own = [i if type(i) is str and i else None for i in given]
    held = set(own)
    names: dict[str, str] = {}
    out = []
    for name, ident in zip(named[:_MAX_POSITIONS], own, strict=False):
        call_id = ident if ident is not None else _minted(run, held)
        details = {**error.details, "function_names": {call_id: names.setdefault(call_id, name)}}
        error_here = dataclasses.replace(error, details=details)
        out.append(dataclasses.replace(failure, call_id=call_id, error=error_here))
    return out


def _minted(run: RunState, held: set[str | None]) -> str:
    """The next id the run gives a call without one, skipping those the message holds."""
    while (call_id := f"{run.run_id}:n{next(run.nodes)}") in held:
        pass
    return call_id
