"""Observations as MCP ``tools/call`` results: the one place the gateway shapes what clients read.

Every result carries the whole observation envelope (DESIGN §5) as ``structuredContent``, so a
client program reads ``structuredContent["error"]["category"]`` and ``["recovery"]`` (or
``["data"]``) without parsing text. The text content is what a model reads: the data as JSON, or
one paragraph naming the error category, what to do next, and the rejected fields.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import mcp_types as types

from actionspace.discovery.render import mcp_call_result
from actionspace.errors import DEFAULT_RECOVERY, ActionError
from actionspace.types import Observation

__all__ = ["error_text", "to_call_result"]

_MAX_FIELD_ERRORS_IN_TEXT = 20


def to_call_result(obs: Observation) -> types.CallToolResult:
    """The MCP result of an observation: ``isError`` exactly when the observation is an error.

    A ``partial`` observation (some items of a batch failed) is not an error: its ``items`` say
    which failed, and the text says how many.
    """
    error = obs.error
    if error is not None and not error.recovery and DEFAULT_RECOVERY[error.category]:
        # an error rebuilt from a terse record (a ledger entry settled by recovery) still tells
        # the client what its category allows next
        error = replace(error, recovery=DEFAULT_RECOVERY[error.category])
        obs = replace(obs, error=error)
    text = error_text(error) if error is not None else _data_text(obs)
    return types.CallToolResult.model_validate(mcp_call_result(obs, text=text, structured=obs.to_dict()))


def error_text(error: ActionError) -> str:
    """One readable paragraph: category, message, allowed next steps, field errors, request id."""
    parts = [f"{error.category}: {error.message}"]
    if error.category == "needs_approval" and "request_id" in error.details:
        parts.append(
            f"Approval request {error.details['request_id']} is waiting for a human decision; "
            "call again with the same arguments once it is approved."
        )
    for fe in error.field_errors[:_MAX_FIELD_ERRORS_IN_TEXT]:
        parts.append(f"Field {fe.path or '/'}: {fe.message}")
    if error.alternatives:
        parts.append("Alternatives: " + ", ".join(str(a) for a in error.alternatives[:10]))
    if error.retry_after is not None:
        parts.append(f"Retry after {error.retry_after:g} s.")
    if error.recovery:
        parts.append("Next: " + ", ".join(error.recovery) + ".")
    return "\n".join(parts)


def _data_text(obs: Observation) -> str:
    text = _json(obs.data)
    notes: list[str] = []
    if obs.status == "partial":
        failed = [i.call_id for i in obs.items if i.status == "error"]
        notes.append(f"{len(failed)} of {len(obs.items)} items failed: {', '.join(failed[:20])}")
    if not obs.complete:
        notes.append(
            "incomplete: the output was cut or paged" + (f" (cursor {obs.cursor})" if obs.cursor else "")
        )
    if obs.artifact_ref is not None:
        notes.append(f"full output: {obs.artifact_ref}")
    if obs.diagnostics.get("replayed"):
        notes.append("replayed: this action had already run; nothing was sent again")
    return text if not notes else text + "\n" + "\n".join(f"[{n}]" for n in notes)


def _json(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
