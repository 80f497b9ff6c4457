"""Pydantic AI adapter: the runtime's tools as a toolset (``pip install 'actionspace[pydantic-ai]'``).

Every call the agent makes runs through the engine (validation, approvals, flow, budgets, ledger,
trace); the model reads the ``render-v2`` text of the observation, errors included.

Approvals are Pydantic AI's deferred tools: a call actionspace holds raises ``ApprovalRequired``
with the request as metadata, so a run whose ``output_type`` includes ``DeferredToolRequests``
ends with the requests. :meth:`GovernedToolset.decide` records the person's answers in
``rt.approvals`` and returns the ``DeferredToolResults`` to resume with
(``agent.run(message_history=..., deferred_tool_results=...)``). A call the framework approved
whose request is still pending (approved without ``decide``) is approved as ``approver``; one it
denied (``False`` or ``ToolDenied``, never handed to the tool) is denied as ``approver`` before the
model is asked again (adapters/_pydantic_denials.py). An answer
given with ``decide`` approves the call the person saw and no other: a call resumed with other
arguments (changed in the message history sent back) or under a changed tool definition is
deferred again, on a request of its own, never approved on the earlier answer.
An approval with an edit (``ToolApproved(override_args=...)``, beside ``decide`` or not) runs the
edited call on a request of its own, and the request shown for the model's call is consumed by it
(adapters/_pydantic_edits.py).

    toolset = GovernedToolset(rt, run_id="conv-1")
    agent = Agent(model, toolsets=[toolset.toolset], output_type=[str, DeferredToolRequests])

Runs: with ``run_id`` every agent run acts in that run; without one each conversation (Pydantic
AI's ``conversation_id``: an agent run and the runs that continue its messages) acts in a run of
its own. An agent run given a prompt is a new user turn (its prompt recorded as the user's words),
so the same write asked for again in a later run is a new action; a run resumed with
``deferred_tool_results`` stays in its turn, and a call re-proposed there is replayed.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from pydantic_core import SchemaValidator

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
from actionspace.adapters._pydantic_denials import Denials, deferred
from actionspace.adapters._pydantic_edits import model_arguments, supersede, unheld
from actionspace.approval.requests import ApprovalRequest
from actionspace.discovery.names import ProviderNames
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

if TYPE_CHECKING:
    from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext
    from pydantic_ai.toolsets import FunctionToolset

__all__ = ["GovernedToolset"]

EXTRA = "pydantic-ai"


@dataclass(frozen=True, slots=True)
class _Raw:
    """Arguments the engine must read as the model sent them: the text of a JSON value other than
    an object (a list, a number, null), or text that is not JSON at all."""

    value: Any


def _as_arguments(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"arguments": _Raw(value)}


class _AnyArguments:
    """Lets whatever the model sent reach the engine, which answers text that is not JSON as
    ``parse_error`` and a value that is not an object as ``invalid_arguments`` (Pydantic AI would
    otherwise answer with its own validation text, spread a list with ``**`` and fail, or assert on
    null, or let a value nested deeper than the decoder goes end the run with ``RecursionError``).
    Duck-types the two methods Pydantic AI calls on a tool's ``SchemaValidator``."""

    def validate_json(self, data: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes | bytearray) else data
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # nested past the decoder's depth: the engine says so
            value = None
        return value if isinstance(value, dict) else {"arguments": _Raw(text)}

    def validate_python(self, value: Any, **_: Any) -> dict[str, Any]:
        return _as_arguments(value)


class GovernedToolset:
    """A Pydantic AI ``FunctionToolset`` (:attr:`toolset`) over the tools offered to one run.

    ``run_id`` / ``principal`` / ``names``: as for :class:`~actionspace.adapters._bridge.Bridge`.
    ``approver``: who a framework approval is recorded as when :meth:`decide` was not used.
    Raises ConfigurationError naming the extra when Pydantic AI is not installed.
    """

    def __init__(
        self,
        rt: Runtime,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        names: Sequence[str] | None = None,
        approver: str = "pydantic-ai",
    ) -> None:
        self.bridge = Bridge(rt, run_id=run_id, principal=principal, names=names, approver=approver)
        self.runs = FrameworkRuns(self.bridge, named=run_id is not None)
        self._denials = Denials()
        self.toolset: FunctionToolset[Any] = self._build()

    @property
    def run_id(self) -> str:
        """The run given, or without one the run of the latest agent run that called a tool."""
        return str(self.runs.latest.run_id)

    def user(self, text: str) -> None:
        """The user's words: a new turn of :attr:`run_id`, and a provenance source for later
        arguments (an agent run given a prompt records its prompt so already)."""
        self.runs.latest.user(text)

    def decide(
        self,
        requests: DeferredToolRequests,
        approvals: Mapping[str, bool],
        *,
        by: str,
        reason: str | None = None,
    ) -> DeferredToolResults:
        """Record each answer (tool call id → approved?) in ``rt.approvals``; the results to resume with.

        Raises TypeError, recording nothing, when an answer is not ``True`` or ``False`` (a
        ``"false"`` string would otherwise approve).
        """
        odd = {call_id: answer for call_id, answer in approvals.items() if not isinstance(answer, bool)}
        if odd:
            raise TypeError(f"approvals must map tool call ids to True or False, got {odd!r}")
        pai = require("pydantic_ai", EXTRA)
        results: DeferredToolResults = pai.DeferredToolResults()
        for part in requests.approvals:
            if part.tool_call_id not in approvals:
                continue
            approved = approvals[part.tool_call_id]
            request_id = (requests.metadata.get(part.tool_call_id) or {}).get("request_id")
            if request_id is not None:
                self.bridge.settle(str(request_id), approved=approved, by=by, reason=reason)
                # the request decided travels with the answer: it approves that call and no other
                results.metadata[part.tool_call_id] = {_DECIDED: str(request_id)}
            results.approvals[part.tool_call_id] = (
                True if approved else pai.ToolDenied(reason or f"denied by {by}")
            )
        return results

    def _build(self) -> FunctionToolset[Any]:
        pai = require("pydantic_ai", EXTRA)
        require("pydantic_ai.toolsets", EXTRA)
        catalog = self.bridge.rt.catalog
        names = self._names = ProviderNames(catalog.generation, (s.name for s in catalog.offerable()))
        tools = []
        for offered in self.bridge.offered():
            tool = pai.Tool.from_schema(
                self._function(offered.name),
                name=names.offered(offered.name),  # ``files.read`` is offered as a name providers take
                description=offered.description,
                json_schema=offered.parameters,
                takes_ctx=True,
            )
            tool.strict = False  # the runtime offers its schemas as they are, never in strict mode
            tool.function_schema.validator = cast(SchemaValidator, _AnyArguments())
            tools.append(tool)
        toolset: FunctionToolset[Any] = _toolset_class()(tools)
        toolset.governed_denials = self._settle_denials  # type: ignore[attr-defined]
        return toolset

    async def _settle_denials(self, ctx: RunContext[Any]) -> None:
        """Deny in ``rt.approvals`` the calls a person denied in Pydantic AI alone (adapters/
        _pydantic_denials.py). Best effort: the agent run goes on whatever the store answers."""
        try:
            run_id = self.runs.run_of(ctx.run_id, run_key=ctx.conversation_id)
            if self._denials.fresh(run_id, ctx.conversation_id, ctx.messages):
                settle = self._denials.settle
                await asyncio.to_thread(settle, self.runs.latest, run_id, ctx.conversation_id, ctx.messages)
        except Exception:  # the requests stay pending, for rt.approvals
            return

    def _function(self, name: str) -> Any:
        runs, names = self.runs, self._names
        exceptions = require("pydantic_ai.exceptions", EXTRA)

        async def run(ctx: RunContext[Any], **arguments: Any) -> str:
            # an agent run given the user's prompt is a new turn; one resumed from its messages is not
            try:
                bridge = runs.bridge(
                    ctx.run_id,
                    fresh=ctx.prompt is not None,
                    words=_words(ctx.prompt),
                    run_key=ctx.conversation_id,
                )
            except Exception as exc:  # the turn was not begun: nothing runs, the model may ask again
                return Bridge.text(unsent(NO_TURN, exc, name, ctx.tool_call_id))
            wrapped = arguments.get("arguments")
            edited = bool(ctx.tool_call_approved) and _edited(ctx.messages, ctx.tool_call_id, arguments)
            if isinstance(wrapped, _Raw):
                arguments = wrapped.value
            occurrence = _occurrence(bridge, names, ctx.messages, ctx.tool_call_id)
            obs = await bridge.acall(name, arguments, ctx.tool_call_id, occurrence=occurrence)
            request_id = held_request(obs)
            if request_id is None and edited:  # the edit ran unheld, or was refused: it was the answer
                decided = await asyncio.to_thread(_decided, bridge, ctx.tool_call_metadata)
                conversation, call_id = ctx.conversation_id, ctx.tool_call_id
                await asyncio.to_thread(unheld, bridge, obs, arguments, conversation, call_id, decided)
            elif request_id is not None:
                metadata = ctx.tool_call_metadata
                try:
                    approved = bool(ctx.tool_call_approved) and _approve(bridge, metadata, request_id, edited)
                except Exception as exc:  # the store did not take the answer: nothing runs
                    return Bridge.text(unsent(NO_ANSWER, exc, name, ctx.tool_call_id))
                if not approved:
                    await asyncio.to_thread(
                        deferred, bridge, request_id, ctx.conversation_id, ctx.tool_call_id
                    )
                    raise exceptions.ApprovalRequired(metadata=dict(bridge.preview(obs)))
                obs = await bridge.acall(name, arguments, ctx.tool_call_id, occurrence=occurrence)
                if edited:  # the request shown for the model's call was answered with this edit
                    decided = await asyncio.to_thread(_decided, bridge, metadata)
                    conversation, call_id = ctx.conversation_id, ctx.tool_call_id
                    await asyncio.to_thread(supersede, bridge, request_id, conversation, call_id, decided)
            return bridge.text(obs)

        run.__name__ = name
        return run


@functools.cache
def _toolset_class() -> type[FunctionToolset[Any]]:
    from pydantic_ai.toolsets import FunctionToolset

    class GovernedFunctionToolset(FunctionToolset[Any]):
        """Lists its tools as Pydantic AI asks before each model request, the run's messages at hand:
        first it settles the denials those messages hold (``governed_denials``)."""

        governed_denials: Any = None

        async def get_tools(self, ctx: RunContext[Any]) -> dict[str, Any]:
            if self.governed_denials is not None:
                await self.governed_denials(ctx)
            return await super().get_tools(ctx)

    return GovernedFunctionToolset


_DECIDED = "actionspace_request_id"
"""The key of ``DeferredToolResults.metadata`` naming the request :meth:`GovernedToolset.decide` decided."""


def _approve(bridge: Bridge, metadata: Any, held: str, edited: bool = False) -> bool:
    """Record the framework's approval of the call held on request ``held``, when it approves that
    call (:func:`_covers`; ``edited``: the call is the person's edit of it, see
    adapters/_pydantic_edits.py): on the answer given with ``decide`` (``metadata``), else as the
    toolset's ``approver``. False when it does not. Raises what the store raises."""
    decided = _decided(bridge, metadata)
    if not (_covers(bridge, decided, held) or (edited and _edit_of(bridge, decided, held))):
        return False
    if decided is None:
        bridge.settle(held, approved=True)
    else:  # the same call as the one decided: on that person's answer
        bridge.settle(held, approved=True, by=decided.decided_by, reason=decided.decision_reason)
    return True


def _decided(bridge: Bridge, metadata: Any) -> ApprovalRequest | None:
    """The request a person decided for this call with :meth:`GovernedToolset.decide`, if any."""
    request_id = metadata.get(_DECIDED) if isinstance(metadata, Mapping) else None
    return bridge.rt.approvals.get(request_id) if isinstance(request_id, str) else None


def _covers(bridge: Bridge, decided: ApprovalRequest | None, held: str) -> bool:
    """Whether the answer to ``decided`` approves the call now held on request ``held``.

    Without a decided request (approved in Pydantic AI without ``decide``) it does. Else only the
    same call does: same run, tool version, definition and arguments. Identical calls of one
    response share their request, so the second is held on a new one the answer covers; a call
    whose arguments changed in the message history sent back, or whose tool's definition changed
    meanwhile, is not what the person saw, and is deferred again on its own request."""
    if decided is None or decided.id == held:
        return True
    now = bridge.rt.approvals.get(held)
    return (
        now is not None
        and decided.status in ("approved", "consumed")
        and (now.run_id, now.tool, now.args_digest, now.details.get("definition_hash"))
        == (decided.run_id, decided.tool, decided.args_digest, decided.details.get("definition_hash"))
    )


def _edit_of(bridge: Bridge, decided: ApprovalRequest | None, held: str) -> bool:
    """Whether the call held on ``held``, the person's edit of a call (Pydantic AI handed the tool
    other arguments than the model's call in the history holds: ``ToolApproved.override_args``,
    given beside the answer, never read from the history sent back), is what the answer to
    ``decided`` approved: same run, tool version and definition, the answer an approval."""
    now = bridge.rt.approvals.get(held)
    return (
        decided is not None
        and now is not None
        and decided.status == "approved"
        and (now.run_id, now.tool, now.details.get("definition_hash"))
        == (decided.run_id, decided.tool, decided.details.get("definition_hash"))
    )


def _edited(messages: Sequence[Any], call_id: str | None, arguments: Mapping[str, Any]) -> bool:
    """Whether Pydantic AI handed the tool other arguments than the model's call ``call_id`` in
    ``messages`` holds (read as the tool reads them): the approval came with an edit."""
    found, sent = model_arguments(messages, call_id)
    if not found:
        return False
    reader = _AnyArguments()
    as_read = reader.validate_json(sent) if isinstance(sent, str) else reader.validate_python(sent)
    return as_read != dict(arguments)


def _occurrence(
    bridge: Bridge, names: ProviderNames, messages: Sequence[Any], call_id: str | None
) -> Occurrence:
    """Where ``call_id`` stands among the identical calls of its model response
    (:func:`~actionspace.adapters._bridge.occurrences`); the first of one when no response holds it."""
    for message in reversed(messages):
        parts = [p for p in getattr(message, "parts", ()) if getattr(p, "part_kind", None) == "tool-call"]
        ids = [p.tool_call_id for p in parts]
        if call_id in ids:
            calls = [(names.tool(str(p.tool_name)), p.args) for p in parts]
            return bridge.occurrences(calls)[ids.index(call_id)]
    return FIRST


def _words(prompt: Any) -> str:
    """The text of an agent run's prompt (a string, or content parts of which the strings count)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return "\n".join(part for part in prompt if isinstance(part, str))
    return ""
