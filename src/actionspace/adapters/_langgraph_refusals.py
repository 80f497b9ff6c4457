"""LangGraph: a model message LangChain could not read whole is refused whole.

A call LangChain could not read (arguments that are not JSON, no name) lands in
``AIMessage.invalid_tool_calls``, which a ``ToolNode`` never sees; a message whose calls share a
call id cannot be answered call by call. ``governed_tool_node`` answers such a message with the
engine's ``parse_error``, one ``ToolMessage`` of status ``error`` per call id, and runs none of
its calls, as the engine treats any model message with a malformed call.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actionspace.adapters._bridge import Bridge
from actionspace.discovery.names import ProviderNames
from actionspace.errors import ActionError
from actionspace.parse import ParseResult, parse
from actionspace.types import Observation

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, ToolMessage

__all__ = ["answers", "refused"]


def refused(message: AIMessage, names: ProviderNames) -> tuple[dict[str, Any], ParseResult] | None:
    """The message as a provider sent it (each offered name as the tool's own) and the
    ``parse_error`` refusing it, or None when its calls may run (no invalid call, no call id
    given twice)."""
    valid, invalid = list(message.tool_calls), list(message.invalid_tool_calls)
    ids = [c.get("id") for c in (*valid, *invalid) if c.get("id")]
    if not invalid and len(set(ids)) == len(ids):
        return None
    entries = [_entry(c.get("id"), _tool(names, c.get("name")), _text(c.get("args"))) for c in valid]
    entries += [_entry(c.get("id"), _tool(names, c.get("name")), _text(c.get("args"))) for c in invalid]
    raw = {"role": "assistant", "content": None, "tool_calls": entries}
    parsed = parse(raw)
    if parsed.error is None:  # LangChain refused a call the parser reads: it still must not run
        first = invalid[0]
        said = str(first.get("error") or "no reason given")[:300]
        details = {"format": "langchain", "reason": "invalid_tool_call", "index": len(valid), "error": said}
        if first.get("id"):
            details["id"] = str(first.get("id"))[:200]
        error = ActionError.of(
            "parse_error",
            f"langchain call {len(valid)}: the call could not be read ({said}); none of the message's "
            "calls ran: re-emit them",
            details=details,
        )
        parsed = dataclasses.replace(parsed, calls=(), error=error)
    return raw, parsed


def _tool(names: ProviderNames, name: Any) -> Any:
    return names.tool(name) if isinstance(name, str) else name


def _entry(call_id: Any, name: Any, arguments: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"type": "function", "function": {"name": name or "", "arguments": arguments}}
    if call_id:
        entry["id"] = call_id
    return entry


def _text(arguments: Any) -> str:
    """Arguments as the provider sent them: the text of an invalid call, the JSON of a read one."""
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return ""
    try:
        return json.dumps(arguments, default=str)
    except (TypeError, ValueError):  # a cycle: nothing of it can be sent anyway
        return ""


def answers(message: AIMessage, out: Sequence[Observation]) -> list[ToolMessage]:
    """One ToolMessage per call id of ``message``, from the first observation answering it."""
    from langchain_core.messages import ToolMessage

    names = {c.get("id"): c.get("name") for c in (*message.tool_calls, *message.invalid_tool_calls)}
    answered: list[ToolMessage] = []
    seen: set[str] = set()
    for obs in out:
        if obs.call_id in seen or obs.call_id not in names:
            continue
        seen.add(obs.call_id)
        name = names[obs.call_id]
        answered.append(
            ToolMessage(
                content=Bridge.text(obs),
                tool_call_id=obs.call_id,
                name=name if isinstance(name, str) else None,
                status="error" if obs.status == "error" else "success",
            )
        )
    return answered
