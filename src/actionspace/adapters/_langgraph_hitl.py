"""Whether LangChain's ``HumanInTheLoopMiddleware`` (``create_agent``) already asked the person about
the very call a tool is handed, and they approved it (or edited it into this call).

A tool that requires approval in actionspace and is listed in the middleware's ``interrupt_on``
would otherwise be asked about twice: the middleware's "approve" lets the call reach the tool,
which interrupts again with actionspace's request. When the middleware's answer provably approves
this call, the adapter records it in ``rt.approvals`` (as the tools' approver) and the call runs:
one question. Proof, read from what LangGraph keeps, never from the middleware's object:

* ``interrupt_mode="per_call"``: the middleware interrupts inside the tool call's own task, before
  the tool runs, so the task's first answer is its decision about this call: ``approve``, or an
  ``edit`` whose action is this call;
* ``"batched"`` (the default): the middleware interrupts in its own node, a step before the tools
  run; the checkpoint of that step keeps its interrupt (the calls shown, as the model sent them),
  the person's decisions, and the model message it wrote back, which must hold this call's id.
  Every call shown that is this one (or that was edited into it) must have been approved: the
  decisions name no call id, so an "approve" beside a "reject" of identical calls proves nothing.

Anything else (no such middleware in the graph, the tool not listed, no checkpoint to read) is not
proof: actionspace asks, as without the middleware. A call the middleware rejects never reaches
the tool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["REASON", "reviewed"]

REASON: Final = "approved in HumanInTheLoopMiddleware"
"""The decision reason recorded for a call the middleware's reviewer approved."""

_EDITS: Final = "hitl_edited_tool_calls"
"""The middleware's state key (its edits by call id): a graph without it has no such middleware."""

# LangGraph's task config and checkpoint writes (``langgraph._internal._constants``)
_READ: Final = "__pregel_read"
_SCRATCHPAD: Final = "__pregel_scratchpad"
_CHECKPOINTER: Final = "__pregel_checkpointer"
_INTERRUPT: Final = "__interrupt__"
_RESUME: Final = "__resume__"

_STEPS: Final = 8
"""How many checkpoints before the tools' step are read for the middleware's batched question."""


def reviewed(configurable: Mapping[str, Any], name: str, arguments: Any, call_id: str | None) -> bool:
    """Whether the middleware's reviewer approved call ``call_id`` of tool ``name`` (as offered)
    with ``arguments`` (as the tool was handed them). Never raises: anything unreadable is False."""
    if call_id is None or not isinstance(arguments, Mapping):
        return False
    try:
        if not _in_graph(configurable):
            return False
        action = {"name": name, "args": dict(arguments)}
        return _per_call(configurable, action) or _batched(configurable, action, call_id)
    except Exception:  # LangGraph's keeping changed, or the checkpointer failed: actionspace asks
        return False


def _in_graph(configurable: Mapping[str, Any]) -> bool:
    read = configurable.get(_READ)
    if not callable(read):
        return False
    try:
        read(_EDITS, False)
    except KeyError:  # no such channel: the graph has no such middleware
        return False
    except Exception:  # the channel is there, not written yet
        return True
    return True


def _approves(decision: Any, shown: Mapping[str, Any] | None, action: Mapping[str, Any]) -> bool | None:
    """What ``decision`` says of ``action``: True (approved as shown, or edited into it), False
    (another answer about it), None (the decision is not about it)."""
    if not isinstance(decision, Mapping):
        return None
    kind = decision.get("type")
    edited = decision.get("edited_action")
    if kind == "edit" and isinstance(edited, Mapping):
        if _same(edited, action):
            return True
        return False if shown is not None and _same(shown, action) else None
    if shown is not None and not _same(shown, action):
        return None
    return kind == "approve"


def _same(shown: Mapping[str, Any], action: Mapping[str, Any]) -> bool:
    return bool(shown.get("name") == action["name"] and shown.get("args") == action["args"])


def _per_call(configurable: Mapping[str, Any], action: Mapping[str, Any]) -> bool:
    """The task's first answer is the middleware's decision about this call (its own interrupt,
    raised before the tool ran in this task), approving it."""
    resumes = getattr(configurable.get(_SCRATCHPAD), "resume", None)
    if not isinstance(resumes, list) or not resumes:
        return False
    first = resumes[0]
    if not isinstance(first, Mapping) or "type" not in first:
        return False
    return _approves(first, None, action) is True


def _batched(configurable: Mapping[str, Any], action: Mapping[str, Any], call_id: str) -> bool:
    saver = configurable.get(_CHECKPOINTER)
    ns = _graph_ns(str(configurable.get("checkpoint_ns") or ""))
    ids = configurable.get("checkpoint_map")
    checkpoint_id = (
        ids.get(ns) if isinstance(ids, Mapping) and ns in ids else configurable.get("checkpoint_id")
    )
    if saver is None or checkpoint_id is None:
        return False
    at = {"configurable": {"thread_id": configurable.get("thread_id"), "checkpoint_ns": ns}}
    at["configurable"]["checkpoint_id"] = checkpoint_id
    current = saver.get_tuple(at)
    for _ in range(_STEPS):
        if current is None or current.parent_config is None:
            return False
        current = saver.get_tuple(current.parent_config)
        if current is None:
            return False
        verdict = _question(current.pending_writes or (), action, call_id)
        if verdict is not None:
            return verdict
    return False


def _question(writes: Sequence[Any], action: Mapping[str, Any], call_id: str) -> bool | None:
    """The verdict of the middleware's batched question among a checkpoint's ``writes`` about the
    message holding ``call_id``; None when that checkpoint holds no such question."""
    tasks: dict[Any, dict[str, Any]] = {}
    for task, channel, value in writes:
        tasks.setdefault(task, {}).setdefault(channel, value)
    for written in tasks.values():
        interrupts, resumes = written.get(_INTERRUPT), written.get(_RESUME)
        if not isinstance(interrupts, list) or not isinstance(resumes, list) or not interrupts or not resumes:
            continue
        value = getattr(interrupts[0], "value", None)
        if not isinstance(value, Mapping) or "action_requests" not in value:
            continue
        if not _holds(written.get("messages"), call_id):
            continue
        decisions = resumes[0].get("decisions") if isinstance(resumes[0], Mapping) else None
        shown = value["action_requests"]
        if not isinstance(decisions, list) or not isinstance(shown, list) or len(decisions) != len(shown):
            return False
        said = [
            _approves(d, s, action) if isinstance(s, Mapping) else None
            for s, d in zip(shown, decisions, strict=True)
        ]
        about = [s for s in said if s is not None]
        return bool(about) and all(about)
    return None


def _holds(messages: Any, call_id: str) -> bool:
    """Whether the messages a task wrote hold a model message proposing call ``call_id``."""
    for message in messages if isinstance(messages, list) else ():
        calls = getattr(message, "tool_calls", None)
        if isinstance(calls, list) and any(isinstance(c, Mapping) and c.get("id") == call_id for c in calls):
            return True
    return False


def _graph_ns(task_ns: str) -> str:
    """The checkpoint namespace of the graph a task runs in: its own less its last segment."""
    return task_ns.rpartition("|")[0] if "|" in task_ns else ""
