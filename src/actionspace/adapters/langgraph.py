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
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actionspace.adapters._bridge import Bridge, held_request, require
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Observation

if TYPE_CHECKING:
    from langchain_core.tools import StructuredTool

__all__ = ["governed_tools", "tools_of"]

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
