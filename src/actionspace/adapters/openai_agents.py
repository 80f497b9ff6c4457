"""OpenAI Agents SDK adapter: the runtime's tools as ``FunctionTool``s.

Needs ``pip install 'actionspace[openai-agents]'``.

Every call the agent makes runs through the engine (validation, approvals, flow, budgets, ledger,
trace); the model reads the ``render-v2`` text of the observation, errors included.

Approvals use the SDK's own tool approval: a tool that ``requires_approval`` (or has
``high_risk_args``) is declared ``needs_approval``, so the run stops with
``result.interruptions``; ``state.approve(item)`` / ``state.reject(item)`` and ``Runner.run(agent,
state)`` resume it. When the SDK asks, the call is held at actionspace's approval gate, its request
filed for the tool as defined then; when the approved call reaches actionspace that request is
approved in ``rt.approvals`` as ``approver`` and the call runs — bound to its exact arguments and
that definition (adapters/_openai_asked.py: a tool defined again before the resume is held again).
A call the person rejects never reaches the tool: as the resumed run's next turn begins, the tool's
``is_enabled`` finds the rejection in the run's context and denies its request, with the person's
message as the reason.
A call held without the SDK having asked (a flow policy asking to declassify) comes back to the
model as ``needs_approval``; decide it in ``rt.approvals`` or the console.

    tools = governed_tools(rt, run_id="conv-1")
    agent = Agent(name="ops", model=..., tools=tools)

Runs: with ``run_id`` every ``Runner.run`` acts in that run; without one each SDK run acts in a
run of its own. A ``Runner.run`` given new input is a new user turn (its last user message
recorded as the user's words), so the same write asked for again in a later run is a new action;
a run resumed from its ``RunState`` (here or in another process, once or again from the same
saved state) stays in its turn, and a call re-proposed there is replayed. The SDK run is
recognised by the first tool call id its state keeps; whether it began its turn already is read
from the store.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from actionspace.adapters._bridge import (
    FIRST,
    NO_ANSWER,
    NO_TURN,
    Bridge,
    FrameworkRuns,
    Occurrence,
    held_request,
    require,
    unsent,
)
from actionspace.adapters._openai_asked import approves, asked, mark_of, refuse
from actionspace.discovery.names import ProviderNames
from actionspace.errors import ConfigurationError
from actionspace.parse import user_text
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

if TYPE_CHECKING:
    from agents import RunContextWrapper, Tool
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
    bridge = Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver)
    return _tools(FrameworkRuns(bridge, named=run_id is not None))


def tools_of(bridge: Bridge) -> list[Tool]:
    """The tools of an existing :class:`~actionspace.adapters._bridge.Bridge` (to share its run)."""
    return _tools(FrameworkRuns(bridge, named=True))


def _tools(runs: FrameworkRuns) -> list[Tool]:
    agents = require("agents", EXTRA)
    bridge = runs.latest
    responses = _responses_of(bridge.rt)
    catalog = bridge.rt.catalog
    names = ProviderNames(catalog.generation, (s.name for s in catalog.offerable()))
    out: list[Tool] = []
    for offered in bridge.offered():
        spec = catalog.get(offered.name)
        as_named = names.offered(offered.name)  # ``files.read`` is offered as a name providers take
        asks = bool(spec.requires_approval or spec.high_risk_args)
        out.append(
            agents.FunctionTool(
                name=as_named,
                description=offered.description,
                params_json_schema=offered.parameters,
                on_invoke_tool=_invoker(runs, responses, offered.name, as_named),
                strict_json_schema=False,
                needs_approval=_asker(runs, responses, offered.name) if asks else False,
                is_enabled=_rejections(runs, offered.name, as_named) if asks else True,
            )
        )
    return out


def _invoker(runs: FrameworkRuns, responses: _Responses, name: str, as_named: str) -> Any:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        call_id = ctx.tool_call_id
        try:
            bridge = _bridge_of(runs, ctx)
        except Exception as exc:  # the turn was not begun: nothing runs, the model may ask again
            return Bridge.text(unsent(NO_TURN, exc, name, call_id))
        occurrence = responses.occurrence(ctx, bridge.session.run_id, call_id)
        obs = await bridge.acall(name, arguments or "{}", call_id, occurrence=occurrence)
        sdk_run = _sdk_run(ctx)
        for _ in range(_SETTLES):
            request_id = held_request(obs)
            if request_id is None or not ctx.is_tool_approved(as_named, call_id):
                break
            always = bool(ctx.is_tool_approved(as_named, _NO_CALL))  # approved for every call
            try:
                if not approves(bridge, request_id, sdk_run, call_id, always=always):
                    break  # not the request the SDK asked about (the tool changed since): held again
                bridge.settle(request_id, approved=True)
            except Exception as exc:  # the store did not take the answer: nothing runs
                return Bridge.text(unsent(NO_ANSWER, exc, name, call_id))
            obs = await bridge.acall(name, arguments or "{}", call_id, occurrence=occurrence)
        return bridge.text(obs)

    return invoke


_NO_CALL = "\x00no call"
"""A call id no provider mints: the SDK approves it only by an approval of every call of a tool."""

_SETTLES = 3
"""How many requests one approved call settles: an identical call of its response may be held on
the request the first consumes, then on one of its own (each is a request of the same call)."""


def _asker(runs: FrameworkRuns, responses: _Responses, name: str) -> Any:
    """The tool's ``needs_approval``: always, once the call is held in actionspace on the request
    the person's answer will decide (adapters/_openai_asked.py)."""

    async def needs_approval(ctx: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str) -> bool:
        try:
            bridge = _bridge_of(runs, ctx)
            occurrence = responses.occurrence(ctx, bridge.session.run_id, call_id)
            mark = mark_of(_sdk_run(ctx), call_id)
            await asyncio.to_thread(asked, bridge, name, arguments, call_id, mark, occurrence)
        except Exception:  # the person is asked all the same; unmarked, the answer runs nothing held
            pass
        return True

    return needs_approval


def _rejections(runs: FrameworkRuns, name: str, as_named: str) -> Any:
    """The tool's ``is_enabled``: always enabled. The SDK never hands the tool a call the person
    rejected (``RunState.reject``); it asks this as each turn of a run begins, a resumed run's
    first included, with the person's decisions in the run's context, in whatever process resumes
    it. A call of the run rejected there is denied in ``rt.approvals`` then, before the model reads
    the rejection (:func:`refuse`). Best effort: the run goes on whatever the store answers."""
    # per SDK run, the calls needing no further look (completed unrejected, or their rejection
    # settled), so that a turn reads the SDK's decision of its new calls only, not of the whole run
    looked: OrderedDict[str, set[str]] = OrderedDict()

    async def is_enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        try:
            invocations = getattr(ctx, "_tool_invocations", None)
            if not isinstance(invocations, Mapping) or not invocations:
                return True
            sdk_run = _sdk_run(ctx)
            seen = looked.setdefault(sdk_run, set())
            looked.move_to_end(sdk_run)
            while len(looked) > _LOOKED:
                looked.popitem(last=False)
            rejected: list[str] = []
            for call_id, record in invocations.items():
                if (call := str(call_id)) in seen:
                    continue
                if ctx.is_tool_approved(as_named, call) is False:
                    rejected.append(call)
                elif getattr(record, "completed", False):
                    seen.add(call)
            if not rejected:
                return True
            decisions = {str(c): ctx.is_tool_approved(as_named, str(c)) for c in invocations}
            reasons = {c: ctx.get_rejection_message(as_named, c) for c in rejected}
            run_id = runs.run_of(f"openai-agents:{sdk_run}")
            if await asyncio.to_thread(refuse, runs.latest, run_id, name, sdk_run, decisions, reasons):
                seen.update(rejected)
        except Exception:  # the SDK's run goes on; its requests stay pending, as without the SDK's word
            pass
        return True

    return is_enabled


_LOOKED = 256
"""How many SDK runs a tool remembers the calls of it needs no further look at."""


_RESPONSES: weakref.WeakKeyDictionary[Runtime, _Responses] = weakref.WeakKeyDictionary()
_RESPONSES_LOCK = threading.Lock()


def _responses_of(rt: Runtime) -> _Responses:
    """The responses seen of SDK runs governed by ``rt``, shared by every set of its tools: a
    worker that builds its agent per request resumes a run with tools that never saw it."""
    with _RESPONSES_LOCK:
        found = _RESPONSES.get(rt)
        if found is None:
            found = _RESPONSES[rt] = _Responses()
        return found


class _Responses:
    """Which model response each call of an SDK run came in, and so its ``occurrence``: how
    many calls before it in that response are the same call.

    The SDK records every call id of a run, in order, before it runs a response's calls, with a
    fingerprint of the tool and its arguments read as JSON (``RunState`` carries them across a
    resume), but hands a tool no word of the response its call came in: a response is the calls
    recorded since the previous one, less those completed before it. The first call of a
    response to run records the response here, for every set of tools of the runtime; a resume
    in another process, which finds only the calls not completed yet, counts among those (a
    call approved after an identical one of its response ran there is answered as that one).
    Calls are the same when their fingerprints are, so arguments that differ as JSON but not
    as the action they name (a default written out, another spelling of one date-time) are
    counted apart here. The responses of the last ``keep`` SDK runs are remembered.
    """

    def __init__(self, keep: int = 4096) -> None:
        self._keep = keep
        self._runs: OrderedDict[str, dict[str, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()

    def occurrence(self, ctx: RunContextWrapper[Any], run_id: str, call_id: str) -> Occurrence:
        """Where call ``call_id`` of the SDK run of ``ctx`` stands among the identical calls of its
        response, in actionspace run ``run_id``."""
        invocations = getattr(ctx, "_tool_invocations", None)
        if not isinstance(invocations, Mapping) or call_id not in invocations:
            return FIRST
        key = f"{run_id}:{next(iter(invocations))}"  # the SDK run, as _bridge_of names it
        with self._lock:
            run = self._runs.setdefault(key, {})
            self._runs.move_to_end(key)
            while len(self._runs) > self._keep:
                self._runs.popitem(last=False)
            response = run.get(call_id)
            if response is None:
                response = tuple(
                    i for i, r in invocations.items() if i not in run and not getattr(r, "completed", False)
                )
                run.update(dict.fromkeys(response, response))
        if call_id not in response:
            return FIRST
        mark = _fingerprint(invocations, call_id)
        same = [other for other in response if _fingerprint(invocations, other) == mark]
        if len(same) < 2:
            return FIRST
        return Occurrence(same.index(call_id), mark)


def _fingerprint(invocations: Mapping[str, Any], call_id: str) -> str:
    """The SDK's fingerprint of a call (its tool and arguments), or one of the call id alone."""
    fingerprint = getattr(invocations.get(call_id), "fingerprint", None)
    return fingerprint if isinstance(fingerprint, str) else f"call:{call_id}"


def _sdk_run(ctx: RunContextWrapper[Any]) -> str:
    """The SDK run of ``ctx``, named by its first tool call id ("" when it keeps none)."""
    invocations = getattr(ctx, "_tool_invocations", None)
    if not isinstance(invocations, Mapping) or not invocations:
        return ""
    return str(next(iter(invocations)))


def _bridge_of(runs: FrameworkRuns, ctx: RunContextWrapper[Any]) -> Bridge:
    """The bridge of the SDK run ``ctx`` belongs to, named by its first tool call id.

    The SDK keeps every call id of a run, in order, with whether it completed, in the run's
    state (``RunState`` carries them across a resume, in this process or another): a run none of
    whose calls completed yet is a new run of the user's words, a new turn — unless the store
    shows it began before (``resumable``: :meth:`FrameworkRuns.bridge`), as when the
    same saved state is resumed a second time after a worker sent a write and died unsaved.
    """
    invocations = getattr(ctx, "_tool_invocations", None)
    if not isinstance(invocations, Mapping) or not invocations:
        return runs.bridge(None, fresh=False)
    key = next(iter(invocations))
    fresh = not any(getattr(record, "completed", False) for record in invocations.values())
    return runs.bridge(
        f"openai-agents:{key}",
        fresh=fresh,
        words=_words(ctx.turn_input) if fresh else "",
        resumable=True,
    )


def _words(items: Sequence[Any]) -> str:
    """The text of the run's last user message (empty when it has none, or none as text)."""
    for item in reversed(items):
        role = item.get("role") if isinstance(item, Mapping) else getattr(item, "role", None)
        if role != "user":
            continue
        try:
            return user_text(item if isinstance(item, Mapping) else {"content": getattr(item, "content", "")})
        except ConfigurationError:
            return ""
    return ""
