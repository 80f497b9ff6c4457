"""LangGraph adapter: the runtime's tools as LangChain tools (``pip install 'actionspace[langgraph]'``).

Put them in a ``ToolNode`` (or any node that invokes them): every call runs through the engine
(validation, approvals, flow, budgets, ledger, trace); the model reads the ``render-v2`` text of
the observation, errors included.

Approvals are LangGraph's ``interrupt``: a call actionspace holds interrupts the graph with the
request (``request_id``, tool, arguments, reason, effects). Resume with
``Command(resume={"approved": True, "by": "alice", "reason": "..."})`` (or a bare bool): the answer is
recorded in ``rt.approvals`` and the call, bound to its exact arguments, runs — or the denial is
what the model reads. Only ``True`` approves; any other resume value is a denial. The graph needs
a checkpointer, as every ``interrupt`` does.

    tools = governed_tools(rt, run_id="conv-1")
    graph.add_node("tools", ToolNode(tools))

A call LangChain could not read (arguments that are not JSON, no name) lands in
``AIMessage.invalid_tool_calls``, which a ``ToolNode`` never sees. :func:`governed_tool_node` (with
:func:`governed_tools_condition` as the edge) answers a message holding one with the engine's
``parse_error``, one ``ToolMessage`` of status ``error`` per call id, and runs none of its calls,
as the engine treats any model message with a malformed call; so it does a message whose calls
share a call id. Any other message goes to a ``ToolNode`` of :func:`governed_tools`.

    graph.add_node("tools", governed_tool_node(rt, run_id="conv-1"))
    graph.add_conditional_edges("agent", governed_tools_condition)
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from actionspace.adapters._bridge import Bridge, held_request, require
from actionspace.errors import ActionError
from actionspace.parse import ParseResult, parse
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Observation

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.tools import StructuredTool

__all__ = ["governed_tool_node", "governed_tools", "governed_tools_condition", "tools_of"]

EXTRA = "langgraph"


def governed_tools(
    rt: Runtime,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    names: Sequence[str] | None = None,
    approver: str = "langgraph",
) -> list[StructuredTool]:
    """One ``StructuredTool`` (sync and async) per tool offered to the run, each calling through actionspace.

    ``approver``: who a resume value without ``"by"`` is recorded as. Raises ConfigurationError
    naming the extra when LangGraph is not installed.
    """
    return tools_of(Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver))


def tools_of(bridge: Bridge) -> list[StructuredTool]:
    """The tools of an existing :class:`~actionspace.adapters._bridge.Bridge` (to share its run)."""
    require("langchain_core.tools", EXTRA)
    require("langgraph.types", EXTRA)
    governed = _governed_tool_class()
    out: list[StructuredTool] = []
    for offered in bridge.offered():
        sync, coroutine = _bodies(bridge, offered.name)
        out.append(
            governed(
                func=sync,
                coroutine=coroutine,
                name=offered.name,
                description=offered.description,
                args_schema=offered.parameters,
            )
        )
    return out


@functools.cache
def _governed_tool_class() -> type[StructuredTool]:
    from langchain_core.tools import StructuredTool

    class GovernedTool(StructuredTool):
        """Hands the bodies the model's arguments as one value, with the model's call id.

        LangChain spreads arguments as keywords beside its own (``config``, ``run_manager``,
        ``callbacks``, ``self``), so a tool argument of one of those names would be taken or
        collide; here they stay the tool's.
        """

        def _to_args_and_kwargs(
            self, tool_input: str | dict[str, Any], tool_call_id: str | None
        ) -> tuple[tuple[Any, ...], dict[str, Any]]:
            return (self._parse_input(tool_input, tool_call_id), tool_call_id), {}

    return GovernedTool


def _answer(resume: Any) -> tuple[bool, str | None, str | None]:
    """(approved, by, reason) of a resume value: a bool, or a mapping with ``approved``.

    Only ``True`` approves: any other value (``"false"`` from a form, a list of inbox responses)
    is a denial, never an approval by truthiness.
    """
    if isinstance(resume, Mapping):
        by = resume.get("by")
        reason = resume.get("reason")
        return (
            resume.get("approved") is True,
            None if by is None else str(by),
            None if reason is None else str(reason),
        )
    return resume is True, None, None


def _decided(bridge: Bridge, obs: Observation) -> bool:
    """Interrupt on a held call; record the resumed answer. False when nothing was held."""
    request_id = held_request(obs)
    if request_id is None:
        return False
    interrupt = require("langgraph.types", EXTRA).interrupt
    approved, by, reason = _answer(interrupt(dict(bridge.preview(obs))))
    bridge.settle(request_id, approved=approved, by=by, reason=reason)
    return True


def _bodies(bridge: Bridge, name: str) -> tuple[Any, Any]:
    def sync(arguments: Any, call_id: str | None) -> str:
        obs = bridge.call(name, arguments, call_id)
        if _decided(bridge, obs):
            obs = bridge.call(name, arguments, call_id)
        return bridge.text(obs)

    async def coroutine(arguments: Any, call_id: str | None) -> str:
        obs = await bridge.acall(name, arguments, call_id)
        if _decided(bridge, obs):
            obs = await bridge.acall(name, arguments, call_id)
        return bridge.text(obs)

    return sync, coroutine


def governed_tool_node(
    rt: Runtime,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    names: Sequence[str] | None = None,
    approver: str = "langgraph",
    messages_key: str = "messages",
) -> Runnable[Any, Any]:
    """A graph node (sync and async) answering the last ``AIMessage``'s tool calls.

    A message holding ``invalid_tool_calls``, or calls sharing a call id, is refused whole: none
    of its calls runs, and each call id it gives (invalid calls included; a call without an id
    cannot be answered) gets one ``ToolMessage`` of status ``error`` holding the ``parse_error``
    the engine records for the message (the parser's reason and position when it can read the
    call, else reason ``invalid_tool_call`` with LangChain's ``error``). Any other input goes to a
    ``ToolNode`` of :func:`governed_tools` (approvals interrupt as there). Route to it with
    :func:`governed_tools_condition`. Raises ConfigurationError naming the extra when LangGraph
    is not installed.
    """
    require("langgraph.prebuilt", EXTRA)
    from langchain_core.runnables import RunnableLambda
    from langgraph.prebuilt import ToolNode

    bridge = Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver)
    tools = ToolNode(tools_of(bridge), messages_key=messages_key)

    def node(state: Any, config: RunnableConfig) -> Any:
        message = _last_ai(state, messages_key)
        refusal = None if message is None else _refusal(message)
        if message is None or refusal is None:
            return tools.invoke(state, config)
        out = bridge.rt.engine.calls(
            refusal[0], run_id=str(bridge.run_id), principal=principal, parsed=refusal[1]
        )
        return _shaped(state, messages_key, _answers(message, out))

    async def anode(state: Any, config: RunnableConfig) -> Any:
        message = _last_ai(state, messages_key)
        refusal = None if message is None else _refusal(message)
        if message is None or refusal is None:
            return await tools.ainvoke(state, config)
        out = await bridge.rt.engine.acalls(
            refusal[0], run_id=str(bridge.run_id), principal=principal, parsed=refusal[1]
        )
        return _shaped(state, messages_key, _answers(message, out))

    return RunnableLambda(node, afunc=anode, name="tools")


def governed_tools_condition(state: Any, messages_key: str = "messages") -> Literal["tools", "__end__"]:
    """LangGraph's ``tools_condition``, also routing to ``"tools"`` a last ``AIMessage`` whose
    calls are all in ``invalid_tool_calls`` (the model is answered, not left without a word)."""
    from langgraph.prebuilt import tools_condition

    message = _last_ai(state, messages_key)
    if message is not None and message.invalid_tool_calls:
        return "tools"
    return tools_condition(state, messages_key)


def _last_ai(state: Any, messages_key: str) -> AIMessage | None:
    from langchain_core.messages import AIMessage

    messages: Any
    if isinstance(state, list):
        messages = state
    elif isinstance(state, Mapping):
        messages = state.get(messages_key)
    else:
        messages = getattr(state, messages_key, None)
    last = messages[-1] if isinstance(messages, list) and messages else None
    return last if isinstance(last, AIMessage) else None


def _refusal(message: AIMessage) -> tuple[dict[str, Any], ParseResult] | None:
    """The message as a provider sent it and the ``parse_error`` refusing it, or None when its
    calls may run (no invalid call, no call id given twice)."""
    valid, invalid = list(message.tool_calls), list(message.invalid_tool_calls)
    ids = [c.get("id") for c in (*valid, *invalid) if c.get("id")]
    if not invalid and len(set(ids)) == len(ids):
        return None
    entries = [_entry(c.get("id"), c.get("name"), _text(c.get("args"))) for c in valid]
    entries += [_entry(c.get("id"), c.get("name"), _text(c.get("args"))) for c in invalid]
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


def _answers(message: AIMessage, out: Sequence[Observation]) -> list[ToolMessage]:
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


def _shaped(state: Any, messages_key: str, messages: list[ToolMessage]) -> Any:
    """The node's update in the shape a ``ToolNode`` gives for ``state``."""
    return messages if isinstance(state, list) else {messages_key: messages}
