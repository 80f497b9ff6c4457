"""The offered tools in each provider's format, and observations back as its tool-result messages.

Tools (from what ``Runtime.offer`` returned, or from ``ToolSpec`` objects):

=================  ==========================================================================
``openai_chat``    ``{"type": "function", "function": {"name", "description", "parameters"}}``
``openai_responses`` ``{"type": "function", "name", "description", "parameters", "strict"}``
``anthropic``      ``{"name", "description", "input_schema"}``
``mcp``            ``tools/list`` result ``{"tools": [{"name", "description", "inputSchema",
                   "annotations": {readOnlyHint, destructiveHint, idempotentHint, openWorldHint}}]}``
``gemini``         ``FunctionDeclaration`` ``{"name", "description", "parametersJsonSchema"}``, to
                   send as ``tools=[{"functionDeclarations": [...]}]``
=================  ==========================================================================

Gemini takes the schema as ``parametersJsonSchema`` (JSON Schema as it is) rather than
``parameters`` (a subset of the OpenAPI 3.0 schema object, which has no ``additionalProperties``,
``$ref``, ``const``…): the schema the model reads is the one its arguments are checked against.

A short (progressive-disclosure) definition has no schema: it renders with an open object schema
and a description that carries its effect and risk and says to describe it first.

Results (``render-v2``, :data:`RENDERING`): an OpenAI chat ``role: tool`` message, a Responses
``function_call_output`` item, an Anthropic ``tool_result`` block (``is_error`` on failures) and
an MCP ``CallToolResult`` (``isError`` on failures, ``structuredContent`` the rendered content)
and a Gemini ``functionResponse`` part (``{"name", "response": {"output" | "error": text}, "id"?}``).
The text is the JSON of :func:`result_content` — status, data, error with its category and
recovery, a one-line effects summary, paging, trust, source and freshness, the artifact to read
the rest from — after a line saying so in words when the content is untrusted. Each result has
a size budget. :func:`render_results` answers every call of a turn, by the model's own call ids.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final, Literal

from actionspace._unicode import text_for_utf8
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery._content import (
    RENDERING,
    RESULT_BUDGET,
    effects_summary,
    encoded,
    plain_json,
    rendered,
    rendered_parts,
    result_content,
    untrusted_notice,
)
from actionspace.discovery.disclosure import DESCRIBE_TOOL, full_definition
from actionspace.errors import ConfigurationError
from actionspace.types import Observation

__all__ = [
    "PROVIDERS",
    "RENDERING",
    "RESULT_BUDGET",
    "Provider",
    "anthropic_result",
    "anthropic_tools",
    "effects_summary",
    "gemini_result",
    "gemini_tools",
    "mcp_call_result",
    "mcp_tools_list",
    "once_per_id",
    "openai_chat_result",
    "openai_chat_tools",
    "openai_responses_result",
    "openai_responses_tools",
    "render_result",
    "render_results",
    "render_tools",
    "result_content",
]

Provider = Literal["openai_chat", "openai_responses", "anthropic", "mcp", "gemini"]
PROVIDERS: Final[tuple[Provider, ...]] = ("openai_chat", "openai_responses", "anthropic", "mcp", "gemini")

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
    text = str(d.get("description") or d.get("summary") or "")
    note = d.get("contract_note")
    return f"{text}\n\n{note}".strip() if note else text


def _schema(d: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema with its top-level ``"type": "object"`` said, as every provider requires
    (a ToolSpec's schema may leave it out; it describes an object all the same)."""
    schema = d.get("input_schema", d.get("parameters"))
    if not isinstance(schema, Mapping):
        return dict(_OPEN_SCHEMA)
    return dict(schema) if "type" in schema else {"type": "object", **schema}


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


_GEMINI_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
"""A function name Gemini takes: a letter or ``_``, then letters, digits, ``_ . : -``; at most 64."""


def gemini_tools(definitions: Iterable[Definition]) -> tuple[dict[str, Any], ...]:
    """Gemini ``FunctionDeclaration`` dicts (``name``, ``description``, ``parametersJsonSchema``):
    send them as ``tools=[{"functionDeclarations": list(declarations)}]``. Raises
    ``ConfigurationError`` naming a tool whose name Gemini refuses (it refuses the whole request):
    a session offers such a tool under a name it takes (discovery/names.py) and maps calls back."""
    out = []
    for item in definitions:
        d = _definition(item)
        name = str(d["name"])
        if not _GEMINI_NAME.fullmatch(name):
            raise ConfigurationError(
                f"tool {name!r} cannot be offered to gemini: a function name there starts with a letter or "
                "'_' and holds letters, digits, '_', '.', ':' or '-', at most 64 (a Session offers it "
                "under a name gemini takes)"
            )
        out.append({"name": name, "description": _description(d), "parametersJsonSchema": _schema(d)})
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


def _text(obs: Observation, whole: bool, budget: int, readable: bool) -> str:
    if whole:
        return untrusted_notice(obs) + encoded(obs.to_dict())[1]
    return rendered(obs, budget, readable=readable)[1]


def openai_chat_result(
    obs: Observation,
    call_id: str | None = None,
    *,
    whole: bool = False,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
) -> dict[str, Any]:
    """A Chat Completions ``role: tool`` message answering ``call_id`` (default: the observation's)."""
    return {
        "role": "tool",
        "tool_call_id": call_id or obs.call_id,
        "content": _text(obs, whole, budget, read_artifact),
    }


def openai_responses_result(
    obs: Observation,
    call_id: str | None = None,
    *,
    whole: bool = False,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
) -> dict[str, Any]:
    """A Responses ``function_call_output`` input item answering ``call_id``."""
    return {
        "type": "function_call_output",
        "call_id": call_id or obs.call_id,
        "output": _text(obs, whole, budget, read_artifact),
    }


def anthropic_result(
    obs: Observation,
    call_id: str | None = None,
    *,
    whole: bool = False,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
) -> dict[str, Any]:
    """An Anthropic ``tool_result`` content block answering ``tool_use_id`` = ``call_id``."""
    return {
        "type": "tool_result",
        "tool_use_id": call_id or obs.call_id,
        "content": [{"type": "text", "text": _text(obs, whole, budget, read_artifact)}],
        "is_error": obs.status == "error",
    }


def mcp_call_result(
    obs: Observation,
    *,
    whole: bool = False,
    text: str | None = None,
    structured: Mapping[str, Any] | None = None,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
) -> dict[str, Any]:
    """An MCP ``CallToolResult``: ``isError`` on failures so the model can see and self-correct.

    By default the text is the rendered text (:func:`result_content` as JSON, after the untrusted
    notice when there is one) and ``structuredContent`` the content as plain JSON values. ``text``
    and ``structured`` replace them when given (the gateway sends a readable paragraph and the
    whole observation envelope).
    """
    if text is None or structured is None:
        if whole:
            notice, body = untrusted_notice(obs), encoded(obs.to_dict())[1]
        else:
            notice, body = rendered_parts(obs, budget, readable=read_artifact)
        text = notice + body if text is None else text
        structured = plain_json(body) if structured is None else structured
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": dict(structured),
        "isError": obs.status == "error",
    }


_MINTED: Final = re.compile(r":(?:n[0-9]+|parse)\Z")
"""The end of a call id the runtime gave a call that had none (``<run>:n<k>``, ``<run>:parse``)."""


def gemini_result(
    obs: Observation,
    call_id: str | None = None,
    *,
    whole: bool = False,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
    own_ids: Collection[str] | None = None,
) -> dict[str, Any]:
    """A Gemini ``functionResponse`` part answering the call of ``obs.tool``: ``response`` is
    ``{"error": text}`` on failures, else ``{"output": text}`` (the keys Gemini reads), ``id`` the
    call's own (``call_id``, default the observation's) unless the runtime gave it to a call that
    had none: ``own_ids``, the ids the model's message holds, tell which (a session passes them);
    without them, an id ending as the runtime's do (``<run>:n<k>``, ``<run>:parse``) is taken for
    one it gave. A call of a message that did not run (a ``parse_error`` under the call's own id,
    or under the id the run gave a call without one) is answered under the name the model gave it;
    an observation of no tool naming no call (a message in which no call could be read) is a
    ``text`` part holding the same text: a ``functionResponse`` must name a function called."""
    text = _text(obs, whole, budget, read_artifact)
    ident = call_id or obs.call_id
    own = bool(ident) and (not _MINTED.search(ident) if own_ids is None else ident in own_ids)
    tool = obs.tool or _called(obs, ident, own)
    if tool is None:
        return {"text": text}
    name = tool if tool.isascii() else text_for_utf8(tool)  # a lone surrogate: no UTF-8
    answer: dict[str, Any] = {
        "name": name,
        "response": {"error" if obs.status == "error" else "output": text},
    }
    if own:
        answer["id"] = ident
    return {"functionResponse": answer}


def _called(obs: Observation, ident: str, own: bool) -> str | None:
    """The function the model named in its call ``ident`` of a message whose calls did not run (a
    ``parse_error`` under the call's own id, or under one the run gave a call that had none), as
    the parse read it; else none (``""``) for a call's own id, None for an id the runtime gave."""
    names = obs.error.details.get("function_names") if obs.error is not None else None
    found = names.get(ident) if isinstance(names, Mapping) else None
    if isinstance(found, str):
        return found
    return "" if own else None


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
    if provider == "gemini":
        return gemini_tools(definitions)
    raise ConfigurationError(f"unknown provider {provider!r}; one of {PROVIDERS}")


def render_result(
    obs: Observation,
    provider: Provider,
    call_id: str | None = None,
    *,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
    own_ids: Collection[str] | None = None,
) -> dict[str, Any]:
    """An observation as ``provider``'s tool-result message (MCP ignores ``call_id``: JSON-RPC carries it).
    ``own_ids``: Gemini's, see :func:`gemini_result`.

    A grouped observation renders as one result holding its items; :func:`render_results`
    answers each of the model's calls separately instead.
    """
    if provider == "openai_chat":
        return openai_chat_result(obs, call_id, budget=budget, read_artifact=read_artifact)
    if provider == "openai_responses":
        return openai_responses_result(obs, call_id, budget=budget, read_artifact=read_artifact)
    if provider == "anthropic":
        return anthropic_result(obs, call_id, budget=budget, read_artifact=read_artifact)
    if provider == "mcp":
        return mcp_call_result(obs, budget=budget, read_artifact=read_artifact)
    if provider == "gemini":
        return gemini_result(obs, call_id, budget=budget, read_artifact=read_artifact, own_ids=own_ids)
    raise ConfigurationError(f"unknown provider {provider!r}; one of {PROVIDERS}")


def render_results(
    observations: Observation | Iterable[Observation],
    provider: Provider,
    *,
    budget: int = RESULT_BUDGET,
    read_artifact: bool = True,
    own_ids: Collection[str] | None = None,
) -> list[dict[str, Any]]:
    """One result per proposed call, each answering the model's own call id, in the calls' order;
    an id answered already is not answered again (providers refuse two answers to one id: when a
    message gave one id to several calls, none of them ran and they share one ``parse_error``).

    A grouped observation (``obs.grouped``) stands for its ``items``; a list of observations for
    each of them. ``anthropic``: ONE ``user`` message holding every ``tool_result`` block (the API
    wants all results of a turn in the next user message; no message when there is no result).
    ``gemini``: ONE ``Content`` of role ``user`` holding a ``functionResponse`` part per call,
    in the calls' order (the role Gemini takes function responses in). ``openai_chat``: a
    ``role: tool`` message per call; ``openai_responses``: a ``function_call_output`` item per
    call; ``mcp``: a ``CallToolResult`` per call.
    ``budget`` applies to each result. ``read_artifact``: whether that tool is offered to whom
    reads the results (default True); when not, a trimmed result's hint says its rest cannot be
    read here rather than inviting a call that would be refused. ``own_ids``: the call ids the
    model's message holds (Gemini answers only those under their id, the others by order; None:
    see :func:`gemini_result`). Raises ``ConfigurationError`` for an unknown provider.
    """
    if provider not in PROVIDERS:
        raise ConfigurationError(f"unknown provider {provider!r}; one of {PROVIDERS}")
    calls = _per_call(observations)
    results = [
        render_result(o, provider, budget=budget, read_artifact=read_artifact, own_ids=own_ids) for o in calls
    ]
    key = _ONE_MESSAGE.get(provider)
    if key is None:
        return results
    return [{"role": "user", key: results}] if results else []


_ONE_MESSAGE: Final[Mapping[str, str]] = {"anthropic": "content", "gemini": "parts"}
"""The providers answering every call of a turn in ONE ``user`` message, by the key holding them."""


def _per_call(observations: Observation | Iterable[Observation]) -> Sequence[Observation]:
    given = [observations] if isinstance(observations, Observation) else list(observations)
    out: list[Observation] = []
    for obs in given:
        out.extend(obs.items if obs.grouped else (obs,))
    return once_per_id(out)


def once_per_id(observations: Sequence[Observation]) -> Sequence[Observation]:
    """``observations`` without one whose call id an earlier one answers already."""
    if len(observations) < 2:
        return observations
    seen: set[str] = set()
    once: list[Observation] = []
    for obs in observations:
        if obs.call_id not in seen:
            seen.add(obs.call_id)
            once.append(obs)
    return once
