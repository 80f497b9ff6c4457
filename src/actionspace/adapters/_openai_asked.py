"""Which held call an OpenAI Agents SDK approval approves.

The SDK asks a person about a ``needs_approval`` call before the tool is invoked, and resumes the
run, in this process or another, with nothing but "call ``call_id`` approved": not the tool
definition the person was shown. A tool defined again in between (a description, schema, effect
or version changed; a deploy between the interruption and the resume) would run under a
definition nobody approved.

So when the SDK asks (its ``needs_approval`` callable), the call goes through the stages up to
the approval gate, never further, and the request the gate holds it on is filed then, bound as
every request is to the run, tool version, arguments and definition hash of that moment; the
request records (in its ``details``, under :data:`ASKED`) that the SDK asked about this call.
When the approved call reaches actionspace, the SDK's approval decides the request the call is
held on only when that request is one the SDK asked about for this call, or a request of the very
same call (run, tool version, arguments, definition: identical calls of one response each hold
on a request of their own once the first ran). A call held on any other request (the tool changed
since: a request of its own, naming the earlier one) stays held: the model is told, and a person
decides it in ``rt.approvals``. A call the person rejects in the SDK is never handed to the tool:
:func:`refuse` denies the requests the SDK asked about for rejected calls only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from actionspace.adapters._bridge import Bridge, Occurrence
from actionspace.adapters._marks import flush, from_trace, marks
from actionspace.adapters._marks import mark as keep_mark
from actionspace.adapters._marks import refuse as refuse_marked
from actionspace.approval.requests import ApprovalRequest
from actionspace.parse import parse
from actionspace.pipeline.stages import CallInput, Draft
from actionspace.trace.recorder import Recorder

__all__ = ["ASKED", "approves", "asked", "mark_of", "refuse"]

ASKED: Final = "openai_agents_asked"
"""Key of a request's ``details`` listing the SDK calls (``<SDK run>:<call id>``) it was filed or
found for when the SDK asked a person about them (newest last)."""


def mark_of(sdk_run: str, call_id: str) -> str:
    """What names one call of one SDK run among a request's :data:`ASKED` marks."""
    return f"{sdk_run}:{call_id}"


def asked(
    bridge: Bridge,
    name: str,
    arguments: Mapping[str, Any],
    call_id: str,
    mark: str,
    occurrence: Occurrence,
) -> None:
    """The SDK asks a person about call ``call_id`` (:func:`mark_of` ``mark``): hold it on its
    request (filed now, or the one pending), running the stages up to the approval gate and no
    further, and record on the request that the SDK asked about the call. Blocking (store I/O);
    best effort: a call not held here (its arguments refused, no approval needed, a store that
    fails filing it) is not marked, and an approval the SDK gives for it approves nothing
    actionspace holds. A mark the store fails to write is written again before the SDK's answers
    are read (adapters/_marks.py)."""
    try:
        request_id = _hold(bridge, name, arguments, call_id, occurrence)
    except Exception:  # the SDK asks all the same; without a request its approval decides nothing here
        return
    if request_id is not None:
        keep_mark(bridge, request_id, ASKED, mark, bridge.session.run_id)


def _hold(
    bridge: Bridge, name: str, arguments: Mapping[str, Any], call_id: str, occurrence: Occurrence
) -> str | None:
    """The id of the request the call is held on at the approval gate, or None when a stage up to
    it ends the call otherwise, or lets it through (it is never run here)."""
    rt = bridge.rt
    engine = rt.engine
    item = {
        "type": "function_call",
        "name": name,
        "arguments": json.dumps(dict(arguments)),
        "call_id": call_id,
    }
    parsed = parse(item)  # the call as the invocation will propose it
    if parsed.error is not None or len(parsed.calls) != 1:
        return None
    run = engine.run(bridge.session.run_id, bridge.principal)
    rec = Recorder(run, call_id)
    inp = CallInput(
        run=run,
        call=parsed.calls[0],
        principal=bridge.principal or run.principal,
        rec=rec,
        occurrence=occurrence.count + 1,
    )
    draft = Draft(call_id=call_id, node=f"n{next(run.nodes)}")
    gate = engine.stages.approve
    error = None
    try:
        for stage in engine.ordered:
            error = stage(inp, draft)
            if error is not None or stage == gate:
                break
    finally:
        engine.flush(rec)
    if error is None or error.category != "needs_approval":
        return None
    request_id = error.details.get("request_id")
    return request_id if isinstance(request_id, str) else None


def _marks(request: ApprovalRequest | None) -> list[str]:
    return marks(request, ASKED)


def approves(bridge: Bridge, held: str, sdk_run: str, call_id: str, *, always: bool = False) -> bool:
    """Whether the SDK's approval of call ``call_id`` of SDK run ``sdk_run`` decides request
    ``held``: the SDK asked about this call on that request, or on a request of the very same call
    (same run, tool version, arguments and definition). ``always``: the SDK approved every call of
    the tool (``always_approve``): then also when the SDK run asked about another call of the tool
    under the same definition. Never for a request filed for another definition of the tool."""
    approvals = bridge.rt.approvals
    now = approvals.get(held)
    if now is None:
        return False
    flush(bridge, now.run_id)  # a mark the store failed to take when the SDK asked
    now = approvals.get(held) or now
    if from_trace(bridge, [now], ASKED, sdk_run, [call_id], before_now=True):  # lost by a process now gone
        now = approvals.get(held) or now
    mark = mark_of(sdk_run, call_id)
    if mark in _marks(now):
        return True
    try:
        same = approvals.store.find(now.run_id, now.tool, now.args_digest)
        if any(mark in _marks(request) and _alike(request, now) for request in same):
            return True
        if not always or now.definition is None:
            return False
        of_run = approvals.of_runs([now.run_id])  # the run's requests, however many others filed since
    except Exception:  # the store does not answer: the call stays held
        return False
    asked_here = f"{sdk_run}:"
    return any(
        (request.tool, request.definition) == (now.tool, now.definition)
        and any(m.startswith(asked_here) for m in _marks(request))
        for request in of_run
    )


def refuse(
    bridge: Bridge,
    run_id: str,
    name: str,
    sdk_run: str,
    decisions: Mapping[str, bool | None],
    reasons: Mapping[str, str | None],
) -> bool:
    """Deny, as ``bridge.approver``, each pending request of run ``run_id`` for tool ``name`` that the
    SDK asked about only for calls of SDK run ``sdk_run`` the person rejected there
    (:func:`~actionspace.adapters._marks.refuse`; ``decisions`` and ``reasons`` by SDK call id). A
    rejection of every call of another tool (``always_reject``) says nothing of this one's."""
    return refuse_marked(bridge, run_id, ASKED, sdk_run, decisions, reasons, tool=name)


def _alike(request: ApprovalRequest, now: ApprovalRequest) -> bool:
    """The same call: run, tool version, arguments and definition."""
    return (request.run_id, request.tool, request.args_digest, request.definition) == (
        now.run_id,
        now.tool,
        now.args_digest,
        now.definition,
    )
