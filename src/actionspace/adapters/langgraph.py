"""LangGraph adapter: the runtime's tools as LangChain tools (``pip install 'actionspace[langgraph]'``).

Put them in a ``ToolNode`` (or any node that invokes them): every call runs through the engine
(validation, approvals, flow, budgets, ledger, trace); the model reads the ``render-v2`` text of
the observation, errors included.

Approvals are LangGraph's ``interrupt``: a call actionspace holds interrupts the graph with the
request (``request_id``, tool, arguments, reason, effects). Resume with
``Command(resume={"approved": True, "request_id": ..., "by": "alice", "reason": "..."})`` (or
answers keyed by request id, ``{request_id: True}``): the answer is recorded in ``rt.approvals``
and the call, bound to its exact arguments, runs — or the denial is what the model reads. Only
``True`` approves. An answer decides the request it names and no other: a call held on another
request when the graph resumes (its arguments edited in the state, its tool defined again, another
held call of the message) interrupts again, showing it. An answer naming no request (a bare bool,
a mapping without ``request_id``) decides the call held only when the interrupt it answers showed
that very request (:mod:`~actionspace.adapters._langgraph_answers`); else it too is asked again.
The graph needs a checkpointer, as every ``interrupt`` does.
A call LangChain's ``HumanInTheLoopMiddleware`` provably had the person approve already is approved
on that answer, not asked about again (:mod:`~actionspace.adapters._langgraph_hitl`). An error
observation is a ``ToolMessage`` of status ``"error"``.

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

Runs: with ``run_id`` every LangGraph thread acts in that run; without one each thread
(``config["configurable"]["thread_id"]``) acts in a run of its own, named by the thread id, so
the tools of one compiled graph serve every conversation, concurrent ones included. A graph
without a thread id acts in the tools' run, in one turn. A new user message in a thread is a new
turn (its words recorded, a provenance source), so the same write asked for again later is a
new action; a graph resumed from its checkpoint (``Command(resume=...)``, here or in another
process) stays in its turn, and a call proposed again there is replayed, never sent twice.
A tool whose name providers refuse (``files.read``) is offered under one they take.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

from actionspace.adapters._bridge import (
    FIRST,
    NO_ANSWER,
    NO_TURN,
    Bridge,
    FrameworkRuns,
    Occurrence,
    _run_id_of,
    held_request,
    require,
    unsent,
)
from actionspace.adapters._langgraph_answers import decided
from actionspace.adapters._langgraph_hitl import REASON, reviewed
from actionspace.adapters._langgraph_refusals import answers, refused
from actionspace.adapters._node_calls import STOPPED, NodeCalls
from actionspace.discovery.names import ProviderNames
from actionspace.errors import ConfigurationError
from actionspace.parse import user_text
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Observation

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.runnables import Runnable, RunnableConfig
    from langchain_core.tools import StructuredTool

__all__ = ["governed_tool_node", "governed_tools", "governed_tools_condition", "thread_run_id", "tools_of"]

EXTRA = "langgraph"

# LangGraph's task config: the task's reader of the graph state, and the mark of a graph resumed
# from its checkpoint (``langgraph._internal._constants``; ToolNode reads state the same way).
_READ: Final = "__pregel_read"
_RESUMING: Final = "__pregel_resuming"


class _Threads:
    """The bridge of each LangGraph thread: its actionspace run, in the turn of its latest user
    message (see the module docstring). Safe to call from a ToolNode's worker threads."""

    def __init__(self, first: Bridge, *, named: bool, messages_key: str) -> None:
        self.first = first
        self.messages_key = messages_key
        catalog = first.rt.catalog
        tools = [s.name for s in catalog.offerable()]
        self.names = ProviderNames(catalog.generation, tools)
        self._answering = frozenset(self.names.offered(name) for name in tools)
        self._runs = FrameworkRuns(first, named=named)
        self._lock = threading.Lock()

    def bridge(self, config: Any, messages: Sequence[Any] | None = None) -> Bridge:
        """The bridge of the thread ``config`` names (the tools' own without a thread id).

        ``messages``: the thread's messages (default: read from the graph state under
        ``messages_key``, when the call runs in a graph node). Without a user message among them
        the call acts in the thread run's latest turn.
        """
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        if not isinstance(configurable, Mapping) or configurable.get("thread_id") is None:
            return self.first
        thread = _thread_key(configurable["thread_id"])
        if messages is None:
            messages = _state_messages(configurable, self.messages_key)
        at, human = _last_human(messages)
        key = thread if human is None else f"{thread}:{_message_key(at, human)}"
        # a resumed graph, or a turn one of whose calls of these tools was answered, started its turn
        # already; without the user's message there is no turn to start (the run's latest goes on)
        resumed = configurable.get(_RESUMING) or self._answered(messages[at + 1 :])
        fresh = human is not None and not resumed
        words = _words(human) if fresh else ""
        with self._lock:
            return self._runs.bridge(key, fresh=fresh, words=words, run_key=thread)

    def occurrence(self, config: Any, call_id: str | None, bridge: Bridge) -> Occurrence:
        """Where ``call_id`` stands among the identical calls of its ``AIMessage``
        (:func:`~actionspace.adapters._bridge.occurrences`); the first of one outside a graph
        node, or when no message of the state holds the call."""
        configurable = config.get("configurable") if isinstance(config, Mapping) else None
        if call_id is None or not isinstance(configurable, Mapping):
            return FIRST
        for message in reversed(_state_messages(configurable, self.messages_key)):
            calls = getattr(message, "tool_calls", None) if getattr(message, "type", None) == "ai" else None
            ids = [c.get("id") for c in calls] if isinstance(calls, list) else []
            if call_id in ids:
                proposed = [(self.names.tool(str(c.get("name"))), c.get("args")) for c in calls or ()]
                return bridge.occurrences(proposed)[ids.index(call_id)]
        return FIRST

    def _answered(self, messages: Sequence[Any]) -> bool:
        """Whether one of ``messages`` answers a call of these tools (another tool's answer,
        a ToolNode's tools beside these, says nothing of this turn)."""
        for message in messages:
            name = getattr(message, "name", None)
            if getattr(message, "type", None) == "tool" and isinstance(name, str) and name in self._answering:
                return True
        return False


def thread_run_id(thread_id: Any) -> str:
    """The actionspace run a LangGraph thread acts in when the tools were given no ``run_id``
    (the same in every process: find the thread's trace, ledger entries and approvals by it)."""
    return _run_id_of(_thread_key(thread_id))


def _thread_key(thread_id: Any) -> str:
    return "langgraph:" + json.dumps(str(thread_id))


def _configurable(config: Any) -> Mapping[str, Any]:
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    return configurable if isinstance(configurable, Mapping) else {}


def _state_messages(configurable: Mapping[str, Any], messages_key: str) -> Sequence[Any]:
    """The messages of the graph state the running node reads (none outside a graph node)."""
    read = configurable.get(_READ)
    if not callable(read):
        return ()
    try:
        value = read(messages_key, False)
    except Exception:  # no such channel, or it is empty: LangGraph's errors vary by version
        return ()
    return value if isinstance(value, list) else ()


def _last_human(messages: Sequence[Any]) -> tuple[int, Any]:
    """(position, message) of the last user message; (-1, None) when there is none."""
    for at in range(len(messages) - 1, -1, -1):
        if getattr(messages[at], "type", None) == "human":
            return at, messages[at]
    return -1, None


def _message_key(at: int, message: Any) -> str:
    """What names a user message in its thread: its id (LangGraph's reducer gives each message
    one, kept by the checkpointer), else its position."""
    ident = getattr(message, "id", None)
    return json.dumps(ident if isinstance(ident, str) and ident else at)


def _words(message: Any) -> str:
    """The text of a user message (empty when it holds none as text)."""
    if message is None:
        return ""
    try:
        return user_text(getattr(message, "content", None))
    except ConfigurationError:
        return ""


def governed_tools(
    rt: Runtime,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    names: Sequence[str] | None = None,
    approver: str = "langgraph",
    messages_key: str = "messages",
) -> list[StructuredTool]:
    """One ``StructuredTool`` (sync and async) per tool offered to the run, each calling through actionspace.

    ``run_id``: the run every thread acts in (default: each thread its own, see the module
    docstring). ``approver``: who a resume value without ``"by"`` is recorded as.
    ``messages_key``: the state key of the thread's messages, whose latest user message is the
    turn. Raises ConfigurationError naming the extra when LangGraph is not installed.
    """
    bridge = Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver)
    return _tools(_Threads(bridge, named=run_id is not None, messages_key=messages_key))


def tools_of(bridge: Bridge) -> list[StructuredTool]:
    """The tools of an existing :class:`~actionspace.adapters._bridge.Bridge` (to share its run)."""
    return _tools(_Threads(bridge, named=True, messages_key="messages"))


def _tools(threads: _Threads) -> list[StructuredTool]:
    require("langchain_core.tools", EXTRA)
    require("langgraph.types", EXTRA)
    governed = _governed_tool_class()
    out: list[StructuredTool] = []
    for offered in threads.first.offered():
        sync, coroutine = _bodies(threads, offered.name)
        out.append(
            governed(
                func=sync,
                coroutine=coroutine,
                name=threads.names.offered(
                    offered.name
                ),  # ``files.read`` is offered as a name providers take
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


def _bodies(threads: _Threads, name: str) -> tuple[Any, Any]:
    from langchain_core.runnables import ensure_config  # the config LangChain runs the tool with

    offered = threads.names.offered(name)

    def sync(arguments: Any, call_id: str | None) -> Any:
        config = ensure_config()
        try:
            bridge = threads.bridge(config)
        except Exception as exc:  # the turn was not begun: nothing runs, the model may ask again
            return _reply(unsent(NO_TURN, exc, name, call_id), call_id, offered)
        occurrence = threads.occurrence(config, call_id, bridge)
        obs = bridge.call(name, arguments, call_id, occurrence=occurrence)
        answered = _decided(bridge, obs, config, name, call_id, (offered, arguments))
        if isinstance(answered, Observation):  # the store did not take the answer: nothing runs
            return _reply(answered, call_id, offered)
        if answered:
            obs = bridge.call(name, arguments, call_id, occurrence=occurrence)
        return _reply(obs, call_id, offered)

    async def governed(arguments: Any, call_id: str | None) -> Any:
        config = ensure_config()
        try:
            bridge = threads.bridge(config)
        except Exception as exc:  # the turn was not begun: nothing runs, the model may ask again
            return _reply(unsent(NO_TURN, exc, name, call_id), call_id, offered)
        occurrence = threads.occurrence(config, call_id, bridge)
        obs = await bridge.acall(name, arguments, call_id, occurrence=occurrence)
        answered = _decided(bridge, obs, config, name, call_id, (offered, arguments))
        if isinstance(answered, Observation):  # the store did not take the answer: nothing runs
            return _reply(answered, call_id, offered)
        if answered:
            obs = await bridge.acall(name, arguments, call_id, occurrence=occurrence)
        return _reply(obs, call_id, offered)

    async def coroutine(arguments: Any, call_id: str | None) -> Any:
        calls = NodeCalls.current()  # in governed_tool_node: an interrupt waits for this call
        if calls is None:
            return await governed(arguments, call_id)
        async with calls.running() as started:
            return await governed(arguments, call_id) if started else STOPPED

    return sync, coroutine


def _reply(obs: Observation, call_id: str | None, offered: str) -> Any:
    """What a tool returns of ``obs``: its ``render-v2`` text; for an error, when the tool was handed
    a tool call, a ``ToolMessage`` of status ``"error"`` holding it (LangChain would make one of
    status ``"success"`` of the text, and chat models send a provider that status as its error
    flag, Anthropic's ``is_error``)."""
    text = Bridge.text(obs)
    if call_id is None or obs.status != "error":
        return text
    from langchain_core.messages import ToolMessage

    return ToolMessage(content=text, tool_call_id=call_id, name=offered, status="error")


def _decided(
    bridge: Bridge, obs: Observation, config: Any, name: str, call_id: str | None, call: tuple[str, Any]
) -> bool | Observation:
    """:func:`~actionspace.adapters._langgraph_answers.decided`, the interrupt let through; what the
    model reads instead when the store fails recording the answer (nothing was sent). A call
    LangChain's ``HumanInTheLoopMiddleware`` already had the person approve (``call``: the name
    it was offered under and the arguments the tool was handed) is approved without asking again
    (adapters/_langgraph_hitl.py)."""
    errors = require("langgraph.errors", EXTRA)
    try:
        held = held_request(obs)
        if held is not None and reviewed(_configurable(config), call[0], call[1], call_id):
            bridge.settle(held, approved=True, reason=REASON)
            return True
        return decided(bridge, obs, _configurable(config))
    except errors.GraphBubbleUp:  # the interrupt: the graph stops, showing the call
        raise
    except Exception as exc:
        return unsent(NO_ANSWER, exc, name, call_id)


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
    threads = _Threads(bridge, named=run_id is not None, messages_key=messages_key)
    tools = ToolNode(_tools(threads), messages_key=messages_key)

    def node(state: Any, config: RunnableConfig) -> Any:
        message = _last_ai(state, messages_key)
        refusal = None if message is None else refused(message, threads.names)
        if message is None or refusal is None:
            return tools.invoke(state, config)
        run_id = str(threads.bridge(config, _messages(state, messages_key)).run_id)
        out = bridge.rt.engine.calls(refusal[0], run_id=run_id, principal=principal, parsed=refusal[1])
        return _shaped(state, messages_key, answers(message, out))

    async def anode(state: Any, config: RunnableConfig) -> Any:
        message = _last_ai(state, messages_key)
        refusal = None if message is None else refused(message, threads.names)
        if message is None or refusal is None:
            calls = NodeCalls()
            token = calls.enter()
            try:
                return await tools.ainvoke(state, config)
            except Exception:  # an interrupt: the calls in flight commit before the graph stops
                await calls.settle()
                raise
            finally:
                NodeCalls.leave(token)
        run_id = str(threads.bridge(config, _messages(state, messages_key)).run_id)
        out = await bridge.rt.engine.acalls(refusal[0], run_id=run_id, principal=principal, parsed=refusal[1])
        return _shaped(state, messages_key, answers(message, out))

    return RunnableLambda(node, afunc=anode, name="tools")


def governed_tools_condition(state: Any, messages_key: str = "messages") -> Literal["tools", "__end__"]:
    """LangGraph's ``tools_condition``, also routing to ``"tools"`` a last ``AIMessage`` whose
    calls are all in ``invalid_tool_calls`` (the model is answered, not left without a word)."""
    from langgraph.prebuilt import tools_condition

    message = _last_ai(state, messages_key)
    if message is not None and message.invalid_tool_calls:
        return "tools"
    return tools_condition(state, messages_key)


def _messages(state: Any, messages_key: str) -> list[Any]:
    """The messages of a node's input state (a ToolNode's shapes: a list, a mapping, an object)."""
    messages: Any
    if isinstance(state, list):
        messages = state
    elif isinstance(state, Mapping):
        messages = state.get(messages_key)
    else:
        messages = getattr(state, messages_key, None)
    return messages if isinstance(messages, list) else []


def _last_ai(state: Any, messages_key: str) -> AIMessage | None:
    from langchain_core.messages import AIMessage

    messages = _messages(state, messages_key)
    last = messages[-1] if messages else None
    return last if isinstance(last, AIMessage) else None


def _shaped(state: Any, messages_key: str, messages: list[ToolMessage]) -> Any:
    """The node's update in the shape a ``ToolNode`` gives for ``state``."""
    return messages if isinstance(state, list) else {messages_key: messages}
