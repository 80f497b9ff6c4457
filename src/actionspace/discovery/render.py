"""The offered tools in each provider's format, and observations back as its tool-result messages.

Tools (from what ``Runtime.offer`` returned, or from ``ToolSpec`` objects):

=================  ==========================================================================
``openai_chat``    ``{"type": "function", "function": {"name", "description", "parameters"}}``
``openai_responses`` ``{"type": "function", "name", "description", "parameters", "strict"}``
``anthropic``      ``{"name", "description", "input_schema"}``
``mcp``            ``tools/list`` result ``{"tools": [{"name", "description", "inputSchema",
                   "annotations": {readOnlyHint, destructiveHint, idempotentHint, openWorldHint}}]}``
=================  ==========================================================================

A short (progressive-disclosure) definition has no schema: it renders with an open object schema
and a description that carries its effect and risk and says to describe it first.

Results: an OpenAI chat ``role: tool`` message, a Responses ``function_call_output`` item, an
Anthropic ``tool_result`` block (``is_error`` on failures) and an MCP ``CallToolResult``
(``isError`` on failures, ``structuredContent`` carrying the status, the data and the error with
its ``category`` and ``recovery``). The text content is the JSON of :func:`result_content`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final, Literal

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.disclosure import DESCRIBE_TOOL, full_definition
from actionspace.errors import ConfigurationError
from actionspace.types import Observation

__all__ = [
    "PROVIDERS",
    "Provider",
    "anthropic_result",
    "anthropic_tools",
    "mcp_call_result",
    "mcp_tools_list",
    "openai_chat_result",
    "openai_chat_tools",
    "openai_responses_result",
    "openai_responses_tools",
    "render_result",
    "render_tools",
    "result_content",
]

Provider = Literal["openai_chat", "openai_responses", "anthropic", "mcp"]
PROVIDERS: Final[tuple[Provider, ...]] = ("openai_chat", "openai_responses", "anthropic", "mcp")

_OPEN_SCHEMA: Final[Mapping[str, Any]] = {"type": "object"}

Definition = Mapping[str, Any] | ToolSpec


def _definition(item: Definition) -> Mapping[str, Any]:
    if isinstance(item, ToolSpec):
        return full_definition(item)
    if "name" not in item:
        raise ConfigurationError(f"tool definition without a name: {sorted(item)}")
    return item


def _is_short(d: Mapping[str, Any]) -> bool:
    return "input_schema" not in d and "parameters" not in d


def _description(d: Mapping[str, Any]) -> str:
    if _is_short(d):
        text = str(d.get("summary") or d["name"])
        marks = ", ".join(f"{k}: {d[k]}" for k in ("effect", "risk") if d.get(k) is not None)
        suffix = f"[{marks}] " if marks else ""
        return f"{text} {suffix}(call {DESCRIBE_TOOL} with tool={d['name']!r} for its arguments first)"
    return str(d.get("description") or d.get("summary") or "")


def _schema(d: Mapping[str, Any]) -> dict[str, Any]:
    schema = d.get("input_schema", d.get("parameters"))
    return dict(schema) if isinstance(schema, Mapping) else dict(_OPEN_SCHEMA)


def openai_chat_tools(definitions: Iterable[Definition]) -> tuple[dict[str, Any], ...]:
    """OpenAI Chat Completions ``tools``; an entry already in that shape passes through unchanged.

    Nothing but the name, the description and the input schema reaches the model.
    """
    out: list[dict[str, Any]] = []
    for item in definitions:
        if (
            isinstance(item, Mapping)
            and item.get("type") == "function"
            and isinstance(item.get("function"), Mapping)
        ):
            out.append(dict(item))
            continue
        d = _definition(item)
        function: dict[str, Any] = {"name": str(d["name"])}
        description = _description(d)
        if description:
            function["description"] = description
        function["parameters"] = _schema(d)
        out.append({"type": "function", "function": function})
    return tuple(out)


def openai_responses_tools(definitions: Iterable[Definition]) -> tuple[dict[str, Any], ...]:
    """OpenAI Responses API ``tools``: function tools, ``strict: false`` (our schemas, not strict mode)."""
    out = []
    for item in definitions:
        d = _definition(item)
        out.append(
            {
                "type": "function",
                "name": str(d["name"]),
                "description": _description(d),
                "parameters": _schema(d),
                "strict": False,
            }
        )
    return tuple(out)


def anthropic_tools(definitions: Iterable[Definition]) -> tuple[dict[str, Any], ...]:
    """Anthropic Messages API ``tools``."""
    out = []
    for item in definitions:
        d = _definition(item)
        out.append({"name": str(d["name"]), "description": _description(d), "input_schema": _schema(d)})
    return tuple(out)


def _annotations(d: Mapping[str, Any]) -> dict[str, Any]:
    effect = d.get("effect")
    out: dict[str, Any] = {"title": str(d["name"]).replace("_", " ")}
    if effect is None:
        return out
    read_only = effect in ("none", "read")
    out["readOnlyHint"] = read_only
    if not read_only:
        out["destructiveHint"] = not bool(d.get("reversible", False))
    out["idempotentHint"] = read_only
    out["openWorldHint"] = effect == "external"
    return out


def mcp_tools_list(definitions: Iterable[Definition]) -> dict[str, Any]:
    """An MCP ``tools/list`` result: ``{"tools": [...]}`` with annotations from effect and reversibility.

    ``_meta`` carries the version, risk and schema hash under ``actionspace/``-prefixed keys.
    """
    tools = []
    for item in definitions:
        d = _definition(item)
        tool: dict[str, Any] = {
            "name": str(d["name"]),
            "description": _description(d),
            "inputSchema": _schema(d),
            "annotations": _annotations(d),
        }
        meta = {f"actionspace/{k}": d[k] for k in ("version", "risk", "schema_hash") if d.get(k) is not None}
        if meta:
            tool["_meta"] = meta
        tools.append(tool)
    return {"tools": tools}


def result_content(obs: Observation, *, whole: bool = False) -> dict[str, Any]:
    """What a tool result tells the model: status, data and error (with category and recovery).

    ``whole``: the full observation dict instead (provenance, trimming, effects…).
    """
    if whole:
        return obs.to_dict()
    out: dict[str, Any] = {
        "status": obs.status,
        "data": obs.data,
        "error": obs.error.to_dict() if obs.error else None,
    }
    if not obs.complete:
        out["complete"] = False
    return out


def _text(obs: Observation, whole: bool) -> str:
    return json.dumps(result_content(obs, whole=whole), default=str)


def openai_chat_result(
    obs: Observation, call_id: str | None = None, *, whole: bool = False
) -> dict[str, Any]:
    """A Chat Completions ``role: tool`` message answering ``call_id`` (default: the observation's)."""
    return {"role": "tool", "tool_call_id": call_id or obs.call_id, "content": _text(obs, whole)}


def openai_responses_result(
    obs: Observation, call_id: str | None = None, *, whole: bool = False
) -> dict[str, Any]:
    """A Responses ``function_call_output`` input item answering ``call_id``."""
    return {"type": "function_call_output", "call_id": call_id or obs.call_id, "output": _text(obs, whole)}


def anthropic_result(obs: Observation, call_id: str | None = None, *, whole: bool = False) -> dict[str, Any]:
    """An Anthropic ``tool_result`` content block answering ``tool_use_id`` = ``call_id``."""
    return {
        "type": "tool_result",
        "tool_use_id": call_id or obs.call_id,
        "content": [{"type": "text", "text": _text(obs, whole)}],
        "is_error": obs.status == "error",
    }


def mcp_call_result(
    obs: Observation,
    *,
    whole: bool = False,
    text: str | None = None,
    structured: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An MCP ``CallToolResult``: ``isError`` on failures so the model can see and self-correct.

    By default the text is the JSON of :func:`result_content` and ``structuredContent`` the same
    content as plain JSON values. ``text`` and ``structured`` replace them when given (the gateway
    sends a readable paragraph and the whole observation envelope).
    """
    if text is None or structured is None:
        encoded = json.dumps(result_content(obs, whole=whole), default=str)
        text = encoded if text is None else text
        structured = json.loads(encoded) if structured is None else structured
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": dict(structured),
        "isError": obs.status == "error",
    }


def render_tools(definitions: Iterable[Definition], provider: Provider) -> Any:
    """The offered tools in ``provider``'s format (a tuple of tool dicts; MCP: the ``tools/list`` result)."""
    if provider == "openai_chat":
        return openai_chat_tools(definitions)
    if provider == "openai_responses":
        return openai_responses_tools(definitions)
    if provider == "anthropic":
        return anthropic_tools(definitions)
    if provider == "mcp":
        return mcp_tools_list(definitions)
    raise ConfigurationError(f"unknown provider {provider!r}; one of {PROVIDERS}")


def render_result(obs: Observation, provider: Provider, call_id: str | None = None) -> dict[str, Any]:
    """An observation as ``provider``'s tool-result message (MCP ignores ``call_id``: JSON-RPC carries it)."""
    if provider == "openai_chat":
        return openai_chat_result(obs, call_id)
    if provider == "openai_responses":
        return openai_responses_result(obs, call_id)
    if provider == "anthropic":
        return anthropic_result(obs, call_id)
    if provider == "mcp":
        return mcp_call_result(obs)
    raise ConfigurationError(f"unknown provider {provider!r}; one of {PROVIDERS}")
