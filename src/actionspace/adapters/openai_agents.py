"""OpenAI Agents SDK adapter: the runtime's tools as ``FunctionTool``s.

Needs ``pip install 'actionspace[openai-agents]'``.

Every call the agent makes runs through the engine (validation, approvals, flow, budgets, ledger,
trace); the model reads the ``render-v2`` text of the observation, errors included.

Approvals use the SDK's own tool approval: a tool that ``requires_approval`` (or has
``high_risk_args``) is declared ``needs_approval``, so the run stops with
``result.interruptions``; ``state.approve(item)`` / ``state.reject(item)`` and ``Runner.run(agent,
state)`` resume it. When the approved call reaches actionspace the request it files is approved in
``rt.approvals`` as ``approver`` and the call runs — bound to its exact arguments, as ever. A call
held without the SDK having asked (a flow policy asking to declassify) comes back to the model as
``needs_approval``; decide it in ``rt.approvals`` or the console.

    tools = governed_tools(rt, run_id="conv-1")
    agent = Agent(name="ops", model=..., tools=tools)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from actionspace.adapters._bridge import Bridge, held_request, require
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

if TYPE_CHECKING:
    from agents import Tool
    from agents.tool_context import ToolContext

__all__ = ["governed_tools", "tools_of"]

EXTRA = "openai-agents"


def governed_tools(
    rt: Runtime,
    *,
    run_id: str | None = None,
    principal: Principal | None = None,
    names: Sequence[str] | None = None,
    approver: str = "openai-agents",
) -> list[Tool]:
    """One ``FunctionTool`` per tool offered to the run, each calling through actionspace.

    ``approver``: who an approval given with ``RunState.approve`` is recorded as. Raises
    ConfigurationError naming the extra when the SDK is not installed.
    """
    return tools_of(Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver))


def tools_of(bridge: Bridge) -> list[Tool]:
    """The tools of an existing :class:`~actionspace.adapters._bridge.Bridge` (to share its run)."""
    agents = require("agents", EXTRA)
    out: list[Tool] = []
    for offered in bridge.offered():
        spec = bridge.rt.catalog.get(offered.name)
        out.append(
            agents.FunctionTool(
                name=offered.name,
                description=offered.description,
                params_json_schema=offered.parameters,
                on_invoke_tool=_invoker(bridge, offered.name),
                strict_json_schema=False,
                needs_approval=bool(spec.requires_approval or spec.high_risk_args),
            )
        )
    return out


def _invoker(bridge: Bridge, name: str) -> Any:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        obs = await bridge.acall(name, arguments or "{}", ctx.tool_call_id)
        request_id = held_request(obs)
        if request_id is not None and ctx.is_tool_approved(name, ctx.tool_call_id):
            bridge.settle(request_id, approved=True)
            obs = await bridge.acall(name, arguments or "{}", ctx.tool_call_id)
        return bridge.text(obs)

    return invoke
