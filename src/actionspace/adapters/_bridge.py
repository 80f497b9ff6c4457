"""What the framework adapters share: one governed run, its tools, its calls and its approvals.

A framework adapter turns each tool the runtime offers into the framework's own tool type whose
body is :meth:`Bridge.acall`: the call goes through the whole engine (validation, approvals,
flow, budgets, ledger, trace) and the model reads the ``render-v2`` text of its observation.
What differs per framework is only how a held call (``needs_approval``) pauses the agent and how
the person's answer comes back; :meth:`Bridge.settle` records that answer in ``rt.approvals``.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from actionspace._extras import require
from actionspace.adapters._identical import FIRST, Occurrence, OneAtATime, occurrences
from actionspace.discovery.render import openai_chat_result, openai_responses_tools
from actionspace.errors import ActionError
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.session import Session
from actionspace.types import Observation, ToolCall

__all__ = [
    "FIRST",
    "NO_ANSWER",
    "NO_TURN",
    "Bridge",
    "FrameworkRuns",
    "Occurrence",
    "Offered",
    "held_request",
    "occurrences",
    "require",
    "unsent",
]

_ONE_AT_A_TIME = OneAtATime()
"""Identical calls of one message, of any bridge of the process, run one at a time."""


NO_TURN = "the run's turn could not be begun"
"""Why :func:`unsent`: the store failed while a framework run began its turn (saving the user's
words); proposed again, the call begins the turn anew."""

NO_ANSWER = "the person's answer could not be recorded"
"""Why :func:`unsent`: the store failed while the answer given in the framework was recorded;
proposed again, the call is held again (or runs, on an answer the store did take)."""


def unsent(what: str, exc: Exception, name: str, call_id: str | None) -> Observation:
    """What the model reads of a call the adapter could not take to the engine because the store
    failed (``what``: :data:`NO_TURN`, :data:`NO_ANSWER`): ``transient``, nothing sent. An agent
    framework ends its whole run on an exception from a tool."""
    return Observation.failure(ActionError.unsent(what, exc), call_id=call_id or "", tool=name)


def held_request(obs: Observation) -> str | None:
    """The approval request id when ``obs`` is a call held for a person's decision, else None."""
    if obs.error is None or obs.error.category != "needs_approval":
        return None
    request_id = obs.error.details.get("request_id")
    return str(request_id) if request_id is not None else None


@dataclass(frozen=True, slots=True)
class Offered:
    """One tool as a framework should offer it: what the runtime's own rendering says."""

    name: str
    description: str
    parameters: dict[str, Any]


def _proposal(name: str, arguments: Any, call_id: str | None) -> ToolCall | dict[str, Any]:
    """Arguments as text go through the parser (an OpenAI Responses item), the rest as a ToolCall."""
    if not isinstance(arguments, str):
        return ToolCall(name=name, arguments=arguments, id=call_id)
    item: dict[str, Any] = {"type": "function_call", "name": name, "arguments": arguments}
    if call_id is not None:
        item["call_id"] = call_id
    return item


@dataclass
class Bridge:
    """One run of an agent framework, governed by ``rt``. Not shared between concurrent runs.

    ``run_id``: the actionspace run (default: a new one). ``principal``: who the calls act for
    (default: the runtime's). ``names``: the tools offered (default: every offerable tool).
    ``approver``: who an approval given in the framework is recorded as (default ``"framework"``).
    """

    rt: Runtime
    run_id: str | None = None
    principal: Principal | None = None
    names: Sequence[str] | None = None
    approver: str = "framework"
    session: Session = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.session = self.rt.session(self.run_id, principal=self.principal)
        self.run_id = self.session.run_id

    def user(self, text: str) -> None:
        """The user's words: a new turn (node identity), and a provenance source for arguments."""
        self.session.user(text)

    def began(self, key: str, text: str) -> None:
        """:meth:`user` for framework run ``key``, recorded with the turn it begins (saved with it):
        that run resumed elsewhere from the state it saved before finds it began the turn."""
        run = self.rt.run_state(self.session.run_id)
        with run.lock:  # the turn and who began it change, and are saved, together
            before, turn = run.began, run.turn
            run.began = key
            try:
                self.session.user(text)
            except BaseException:
                if run.turn == turn:  # no turn began: the one in force keeps who began it
                    run.began = before
                raise

    def definitions(self) -> list[dict[str, Any]]:
        """Full definitions of the tools offered to the run (name, description, input_schema, …)."""
        names = self.names
        if names is None:
            names = [s.name for s in self.rt.catalog.offerable() if s.name != "read_artifact"]
        return self.rt.offer(names, run_id=self.run_id, principal=self.principal, disclosure=False)

    def offered(self) -> list[Offered]:
        """The tools offered to the run as the runtime renders them for a model: the description
        with its contract note, the schema with its top-level ``"type": "object"`` (``strict`` off)."""
        return [
            Offered(str(t["name"]), str(t["description"] or t["name"]), dict(t["parameters"]))
            for t in openai_responses_tools(self.definitions())
        ]

    def requires_approval(self, name: str) -> bool:
        """Whether every call of ``name`` needs a person's decision (``ToolSpec.requires_approval``)."""
        return bool(self.rt.catalog.get(name).requires_approval)

    async def acall(
        self, name: str, arguments: Any, call_id: str | None = None, *, occurrence: Occurrence = FIRST
    ) -> Observation:
        """Run one proposed call through the engine; errors come back inside the observation.

        ``arguments`` as the model sent them: a value, or the JSON text (text that is not JSON is
        answered ``parse_error``, as the engine answers a provider's call). ``occurrence``: where
        the call stands among the identical calls of its model message (:func:`occurrences`);
        the calls of an action the message proposes more than once run one at a time.
        """
        proposal = _proposal(name, arguments, call_id)
        if occurrence.action is None:
            return await self.rt.acall(proposal, run_id=self.run_id, principal=self.principal)
        async with _ONE_AT_A_TIME.aheld((id(self.rt), self.run_id, occurrence.action)):
            return await self.rt.acall(
                proposal, run_id=self.run_id, principal=self.principal, occurrence=occurrence.count
            )

    def occurrences(self, calls: Sequence[tuple[str, Any]]) -> list[Occurrence]:
        """:func:`occurrences` of one model message's calls, in this bridge's run (where entity
        bindings are resolved, as the validate stage resolves them)."""
        return occurrences(self.rt, calls, run_id=self.run_id, principal=self.principal)

    def call(
        self, name: str, arguments: Any, call_id: str | None = None, *, occurrence: Occurrence = FIRST
    ) -> Observation:
        """Sync :meth:`acall`."""
        proposal = _proposal(name, arguments, call_id)
        if occurrence.action is None:
            return self.rt.call(proposal, run_id=self.run_id, principal=self.principal)
        with _ONE_AT_A_TIME.held((id(self.rt), self.run_id, occurrence.action)):
            return self.rt.call(
                proposal, run_id=self.run_id, principal=self.principal, occurrence=occurrence.count
            )

    def settle(
        self, request_id: str, *, approved: bool, by: str | None = None, reason: str | None = None
    ) -> None:
        """Record a person's answer to a pending request; one already decided is left as it is."""
        request = self.rt.approvals.get(request_id)
        if request is None or request.status != "pending":
            return
        who = by or self.approver
        if approved:
            self.rt.approvals.approve(request_id, by=who, reason=reason)
        else:
            self.rt.approvals.deny(request_id, by=who, reason=reason)

    @staticmethod
    def text(obs: Observation) -> str:
        """What the model reads of ``obs`` (``render-v2``)."""
        return str(openai_chat_result(obs)["content"])

    @staticmethod
    def preview(obs: Observation) -> Mapping[str, Any]:
        """What a person deciding a held call is shown: request id, tool, arguments, reason."""
        assert obs.error is not None
        details = obs.error.details
        return {
            "request_id": details.get("request_id"),
            "tool": obs.tool,
            "arguments": details.get("arguments"),
            "reason": obs.error.message,
            "effects": details.get("effects", []),
        }


class FrameworkRuns:
    """The actionspace run of each run of an agent framework that reuses one set of tools.

    Without a run id (``named=False``) each framework run acts in a run of its own, whose id is
    derived from the framework's run key (a run resumed elsewhere finds it again); with one, every
    framework run acts in ``first``'s run. Either way a framework run that brings the user's words
    starts a new turn (node identity): the same write asked for in another run is a new action,
    while a run resumed from its state, or a call re-proposed within it, stays in its turn.
    The keys of the last ``keep`` framework runs are remembered.
    """

    def __init__(self, first: Bridge, *, named: bool, keep: int = 4096) -> None:
        self.latest = first
        self._first = first
        self._named = named
        self._keep = keep
        self._runs: OrderedDict[str, Bridge] = OrderedDict()

    def bridge(
        self,
        key: str | None,
        *,
        fresh: bool,
        words: str = "",
        run_key: str | None = None,
        resumable: bool = False,
    ) -> Bridge:
        """The bridge of framework run ``key`` (None: the framework names no run, ``first``).

        ``fresh``: the run starts with the user's ``words``, nothing of it done yet (a new turn the
        first time ``key`` is seen). ``run_key``: what names the actionspace run when none was
        given (default ``key``; a framework's conversation, when its runs continue one another).
        ``resumable``: the framework resumes a run from a state it saved, which memory cannot tell
        from a new run once the tools are built again or in another process (a worker that sent a
        write and died before saving the framework's state leaves that state to be resumed
        again). The store decides then: a run of its own whose turn began, or the run that began
        the shared run's latest turn (``RunState.began``, saved with the turn), stays in its turn,
        so the write it sent is replayed.
        """
        if key is None:
            return self._first
        bridge = self._runs.get(key)
        if bridge is not None:
            self._runs.move_to_end(key)
            return bridge
        bridge = self._first if self._named else self._derived(run_key or key)
        if fresh and not resumable:
            bridge.user(words)
        elif fresh and not _began(bridge, key, derived=not self._named and run_key is None):
            bridge.began(key, words)
        self._runs[key] = self.latest = bridge
        while len(self._runs) > self._keep:
            self._runs.popitem(last=False)
        return bridge

    def run_of(self, key: str | None, *, run_key: str | None = None) -> str:
        """The actionspace run framework run ``key`` acts in (``run_key`` as for :meth:`bridge`),
        found without beginning a turn."""
        if key is None or self._named:
            return self._first.session.run_id
        known = self._runs.get(key)
        return known.session.run_id if known is not None else _run_id_of(run_key or key)

    def _derived(self, run_key: str) -> Bridge:
        first = self._first
        return Bridge(
            first.rt,
            run_id=_run_id_of(run_key),
            principal=first.principal,
            names=first.names,
            approver=first.approver,
        )


def _began(bridge: Bridge, key: str, *, derived: bool) -> bool:
    """Whether framework run ``key`` began its turn in ``bridge``'s run before, as stored.

    A run of its own (``derived``, named by the framework run) began when its turn did; a shared
    run holds other framework runs' turns too: ``key`` must have begun its latest one."""
    run = bridge.rt.run_state(bridge.session.run_id)
    if derived and run.turn > 0:
        return True
    with run.lock:
        return run.began == key


def _run_id_of(run_key: str) -> str:
    return "run_" + hashlib.sha256(run_key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
