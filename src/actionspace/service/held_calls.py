"""Send an approved call on its own, judged on the evidence it was held on.

A server that resumes a call no run of its own waits on (another process filed it, or stopped
while it waited) reads back what the call was judged on when it was held: the provenance of its
argument values (``service/resume_evidence.py``) and, for a plan node, the labels its ``$ref``
arguments carried in its plan (``service/held_nodes.py``). A call whose evidence cannot be read
back is not sent: its observation is the ``policy_violation`` saying why, and :func:`refusal`
gives that error back to a caller that must end the call's run at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.execution.ready import Ready
from actionspace.policy.flow import Binding
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.service.continuation import sending_alone
from actionspace.service.held_nodes import held_bindings
from actionspace.service.resume_evidence import held_proposal, judges_provenance, restore
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

__all__ = ["Evidence", "evidence", "proposer", "refusal", "send_held"]

Evidence = tuple[str | None, tuple[str, dict[str, Binding]] | None]
"""(call id the held call was proposed under, (call id, bindings) of a plan node with references)."""


def proposer(request: ApprovalRequest) -> Principal | None:
    """The principal that proposed the held call, as this runtime recorded it (an empty id stays
    empty, no other principal's); None when the request names none."""
    proposed_by = request.details.get("proposed_by")
    if isinstance(proposed_by, Mapping):
        return Principal.from_dict(proposed_by, allow_empty_id=True)
    return None


async def evidence(
    rt: Runtime, request: ApprovalRequest, principal: Principal | None
) -> Evidence | ActionError:
    """What the held call was judged on, put back in its run's flow state; the ``policy_violation``
    (recorded as the call's observation) when it cannot be read back."""
    events = await asyncio.to_thread(rt.trace.events, request.run_id)
    held = held_proposal(events, request, reads_provenance=judges_provenance(rt.engine.ordered))
    found = None if isinstance(held, ActionError) else held_bindings(events, request)
    node = None if isinstance(found, ActionError) else found
    if isinstance(found, ActionError):
        held = found
    elif held is not None and not isinstance(held, ActionError):
        # the values the held call was judged on, where this process never saw them
        run = await asyncio.to_thread(rt.run_state, request.run_id, principal)
        held = restore(run.flow, held, request.arguments, request.id) or held
    if isinstance(held, ActionError):
        observed = {"status": "error", "category": held.category, "recovery": list(held.recovery)}
        observed["message"] = held.message[:300]
        rt.record(request.run_id, "observation", observed, call_id=held.details.get("call_id"))
        return held
    return (held.call_id if held is not None else None), node


_RESUME_RULES = frozenset({"resume_provenance", "resume_labels", "resume_group"})
"""The rules of :func:`evidence`'s errors: what the held call was judged on cannot be read back."""


async def send_held(rt: Runtime, request: ApprovalRequest, principal: Principal | None) -> Observation:
    """Send the approved call of ``request`` alone under its run and node, re-authorized as
    ``principal``; when it is not sent, the failure observation of :func:`evidence`'s error
    (:func:`refusal` gives it back)."""
    found = await evidence(rt, request, principal)
    if isinstance(found, ActionError):
        call_id = found.details.get("call_id") or f"{request.run_id}:{request.node_id}"
        tool, _, version = request.tool.rpartition("@")
        return Observation.failure(
            found, call_id=str(call_id), tool=tool or request.tool, tool_version=version if tool else None
        )
    call_id, node = found
    async with sending_alone(rt, request):  # no scan settles it, nor takes its run, meanwhile
        if node is not None:  # a plan node: its references' labels, as its plan gave them
            call = ToolCall(name=request.tool, arguments=dict(request.arguments), id=node[0])
            return await _node(rt, call, request, principal, node[1])
        call = ToolCall(name=request.tool, arguments=dict(request.arguments), id=call_id)
        return await rt.acall(
            call,
            run_id=request.run_id,
            node_id=request.node_id,
            provenance=dict(request.provenance),
            principal=principal,
        )


def refusal(sent: Observation | ActionError) -> Observation | ActionError:
    """``sent`` as :func:`send_held` gave it, or the error in it when the held call was not sent
    because what it was held on cannot be read back (the run then ends at once)."""
    if isinstance(sent, ActionError) or sent.error is None or sent.provenance.source != "runtime":
        return sent
    return sent.error if sent.error.details.get("rule") in _RESUME_RULES else sent


async def _node(
    rt: Runtime,
    call: ToolCall,
    request: ApprovalRequest,
    principal: Principal | None,
    bound: dict[str, Binding],
) -> Observation:
    """Send an approved plan node as its plan does (``bound``: its ``$ref`` arguments' labels),
    then show its result to the model as a call's is."""
    engine = rt.engine
    run = await asyncio.to_thread(rt.run_state, request.run_id, principal)
    rec = Recorder(run, call.id)
    try:
        ready = await engine.aprepare(
            run,
            call,
            principal=principal or run.principal,
            rec=rec,
            node_id=request.node_id,
            provenance=dict(request.provenance),
            bound=bound,
        )
        obs = await engine.aexecute(ready, rec) if isinstance(ready, Ready) else ready
    except Exception as exc:  # a bug of ours: typed, with what the call recorded before it
        obs = engine.internal(exc, rec, call)
    run.flow.observed(obs)
    await engine.aflush(rec)
    return obs
