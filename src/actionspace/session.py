"""The agent session: the documented way to drive a model loop through actionspace.

::

    s = rt.session(run_id="conv-42", provider="openai_chat", principal=alice)
    s.user("Text Bob that I'm running late")   # the user's words: a provenance source, a new turn
    tools = s.tools()                          # provider-shaped tools offered this turn
    turn = s.handle(model_output)              # or: await s.ahandle(model_output)
    turn.observations                          # one Observation per proposed call, in order
    turn.messages                              # provider items answering the model's own call ids

**Node identity.** A logical action is (user turn, tool@version, canonical arguments with strings
in NFC, occurrence within the message). Proposing it again in the same turn — after a timeout, with
a new call id, ``"café"`` composed or decomposed — replays the committed result
(``diagnostics["replayed"]``) instead of sending again; after ``s.user(...)`` it is a new action.
While an identical action of the run is ``dispatched``, ``unknown`` or ``unknown_commit``, a new
proposal of it is answered ``unknown_commit`` naming the original key, never sent (docs/exactly-once.md).

**What the model reads** is the versioned rendering ``render-v2``
(:mod:`actionspace.discovery.render`), recorded in the trace as a ``rendered`` event. When a
result shown in the run was trimmed and carries an ``artifact_ref``, the next ``tools()`` also
offers ``read_artifact(ref, offset, length)`` (a session continuing the run in another process too).

**Tool names.** A tool whose name the providers refuse (``files.read``) is offered under one they
take (:mod:`actionspace.discovery.names`); the model's calls of that name run the tool, a
``describe_tool`` call naming it describes the tool, and the errors the model reads name tools so.

**Confidence gating.** With ``s.gate`` set (any object with ``decide(confidence, effect, risk)``
returning ``"execute"``, ``"ask_user"`` or ``"observe_more"``, such as
:class:`actionspace.evaluation.calibration.ThresholdPolicy`), ``s.handle(output, confidence=0.7)``
(one value for every call, or a mapping call id → value) decides per call after validation: an
``execute`` call goes on; any other is held back unrun as ``needs_approval`` whose ``details.gate``
names the decision (``ask_user``: confirm with the user; ``observe_more``: read more, then propose
again). Every decision is a ``gate_decided`` event in the trace. A call without a confidence is
not gated (its event says so), nor is one whose action the ledger holds in its turn (committed,
or sent and in doubt): it runs nothing, and is replayed or answered ``unknown_commit``
(:mod:`actionspace._session_gate`). A confidence that is no number within [0, 1] raises
ConfigurationError.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from actionspace._closing import closed_error, ended_by_close
from actionspace._session_gate import Confidence, ConfidenceGate, GatePolicy, gating
from actionspace._session_output import (
    MAX_CALLS_PER_MESSAGE,
    begin_turn,
    checked_bound,
    checked_confidence,
    fresh_tool,
    handed,
    owned,
    recorded_refusal,
    too_many,
)
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.artifacts import READ_ARTIFACT, read_artifact_tool
from actionspace.discovery.names import ProviderNames
from actionspace.discovery.render import RENDERING, once_per_id, render_results, render_tools
from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError, ConfigurationError, DuplicateToolError, FieldError
from actionspace.ledger.entries import LedgerStore
from actionspace.observation import ArtifactStore
from actionspace.parse import ParseResult, ids_apart, parse, user_text
from actionspace.parse._result import UNFINISHED_STOPS
from actionspace.pipeline import CallInput, Draft, Engine
from actionspace.policy.principal import Principal, authorize
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall
from actionspace.validation.verdicts import Rejected

_log = logging.getLogger("actionspace")


class SessionRuntime(Protocol):
    """What a session uses of :class:`actionspace.Runtime` (which imports this module)."""

    catalog: Catalog
    ledger: LedgerStore
    artifacts: ArtifactStore
    engine: Engine

    def run_state(self, run_id: str | None = None, principal: Principal | None = None) -> RunState: ...

    def user_input(self, run_id: str, text: str) -> None: ...

    def record(
        self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None
    ) -> None: ...

    def offer(
        self,
        names: Iterable[str] | None = None,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
    ) -> list[dict[str, Any]]: ...

    def register(self, spec: ToolSpec) -> ToolSpec: ...


__all__ = ["PROVIDERS", "ConfidenceGate", "GatePolicy", "Provider", "Session", "Turn"]

Provider = Literal["openai_chat", "openai_responses", "anthropic", "gemini"]
PROVIDERS: tuple[Provider, ...] = ("openai_chat", "openai_responses", "anthropic", "gemini")


@dataclass(frozen=True, slots=True)
class Turn:
    """What one model output led to."""

    observations: tuple[Observation, ...]
    """One per proposed call, in the model's order (empty when the model proposed none)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Provider items to append to the conversation, answering each of the model's own call ids
    once (providers refuse two answers to one id): when the model gave one id to several calls,
    none of them ran, each observation is the same ``parse_error`` (``duplicate_call_id``), and the
    id is answered once, with it."""
    content: str | None = None
    """The model's plain text, if any (its answer, when it proposed no call); a refusal included."""
    refusal: str | None = None
    """The model's refusal alone (OpenAI chat ``refusal``, a Responses ``refusal`` part), if any."""
    stop_reason: str | None = None
    """Why the provider says the output ended, in its words (:attr:`ParseResult.stop_reason`)."""

    @property
    def done(self) -> bool:
        """True when the model proposed no call and finished its output: its content is the answer."""
        return not self.observations and not self.unfinished

    @property
    def unfinished(self) -> bool:
        """The provider ended the output before the model finished it (:attr:`ParseResult.unfinished`:
        ``pause_turn``, ``length``…): not :attr:`done`; send the output back and ask again to go on."""
        return self.stop_reason in UNFINISHED_STOPS


class Session:
    """One conversation over one run (see the module docstring). Not shared between threads."""

    def __init__(
        self,
        rt: SessionRuntime,
        run_id: str,
        provider: Provider,
        principal: Principal | None,
        offer: Mapping[str, Any] | None,
    ) -> None:
        if provider not in PROVIDERS:
            raise ConfigurationError(f"provider must be one of {PROVIDERS}, got {provider!r}")
        self.rt = rt
        self.run_id = run_id
        self.provider: Provider = provider
        self.principal = principal
        self._offer = dict(offer or {})
        self._every_name: tuple[int, frozenset[str]] = (-1, frozenset())
        self._names = ProviderNames(-1, ())
        self._tool_messages: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.gate: GatePolicy | None = None
        """Decides per call from the confidence given to :meth:`handle`; None (default): no gating."""
        self._max_calls = MAX_CALLS_PER_MESSAGE
        if rt.run_state(run_id, principal).flow.artifacts:  # a run continued: its artifacts stay readable
            self._read_artifact()

    @property
    def max_calls(self) -> int:
        """Most calls one message may propose (default 512; a whole number, at least 1, else
        ConfigurationError): over it, each is ``budget_exceeded`` and none runs."""
        return self._max_calls

    @max_calls.setter
    def max_calls(self, value: int) -> None:
        self._max_calls = checked_bound(value)

    @property
    def turn(self) -> int:
        """The current user turn (0 before the first :meth:`user`)."""
        return self.rt.run_state(self.run_id).turn

    def user(self, text: str | Sequence[Any] | Mapping[str, Any]) -> None:
        """The user's words: a new turn, a provenance source for later arguments. ``text``: a string,
        content parts or the user message (:func:`actionspace.parse.user_text`: the text parts; another
        role's message, or tool results with no words of the user's, raise ConfigurationError); a
        store that fails to save the turn raises, the turn unmoved and its words not heard."""
        begin_turn(self.rt, self.run_id, user_text(text))  # the text is read before the turn moves

    async def auser(self, text: str | Sequence[Any] | Mapping[str, Any]) -> None:
        """:meth:`user` from async code. With stores on disk or on a server the turn is saved
        before this returns, as by :meth:`user`, but on a worker thread: a sync ``user()`` waits
        for the file's sync on the event loop's thread, and every other task of the loop with it."""
        if self.rt.engine.runs.in_memory:
            self.user(text)
        else:
            await asyncio.to_thread(self.user, text)

    async def atools(self) -> Any:
        """:meth:`tools` from async code, never waiting for a store on the event loop: a run this
        process does not hold is opened, or a run saved without its error categories read from
        its trace, on a worker thread; an offer of other tools than the last saves the run on a
        worker thread before it returns. An agent loop's offer of the same tools again waits for
        nothing and stays on the loop."""
        runs = self.rt.engine.runs
        if runs.in_memory:
            return self.tools()
        run = runs.known(self.run_id)
        if run is None or run.errors_seen is None or not runs.defers_appends:
            return await asyncio.to_thread(self.tools)
        with runs.holding() as held:
            offered = self.tools()
        for changed in held:
            await asyncio.to_thread(runs.persist, changed)
        return offered

    def tools(self) -> Any:
        """The tools offered this turn, in the provider's format (``Runtime.offer`` for this run).

        ``read_artifact`` is among them once a result shown in this run carried an artifact (the
        run's state remembers it: a session continuing the run in another process offers it too).
        """
        options = dict(self._offer)
        names = options.pop("names", None)
        if self.rt.run_state(self.run_id).flow.artifacts:
            self._read_artifact()
            if names is not None:
                names = [*names, READ_ARTIFACT]
        elif names is None:
            names = self._every_tool()
        definitions = self.rt.offer(names, run_id=self.run_id, principal=self.principal, **options)
        return tuple(self._rendered(d) for d in definitions)

    def _rendered(self, definition: dict[str, Any]) -> dict[str, Any]:
        """``definition`` in the provider's format, rendered once per tool version and form (full or
        short) in this session: a new dict each time, its dicts new two levels down, and nothing
        in it shared with the registered tool (a caller may change what it gets)."""
        offered = self._provider_names().offered(definition["name"])
        if offered != definition["name"]:  # a name the providers refuse: offered under one they take
            definition = {**definition, "name": offered}
        key = (
            definition["name"],
            definition.get("version"),
            definition.get("schema_hash"),
            "input_schema" in definition,
        )
        rendered = self._tool_messages.get(key)
        if rendered is None:  # a deep copy kept: nothing handed out shares a dict with the spec
            rendered = copy.deepcopy(render_tools((definition,), self.provider)[0])
            self._tool_messages[key] = rendered
        return fresh_tool(rendered)

    def _provider_names(self) -> ProviderNames:
        """The names the catalog's tools are offered under (see :mod:`actionspace.discovery.names`)."""
        catalog = self.rt.catalog
        if self._names.generation != catalog.generation:
            self._names = ProviderNames(catalog.generation, (s.name for s in catalog.offerable()))
        return self._names

    def _named(self, raw: Any, parsed: ParseResult | None) -> tuple[Any, ParseResult | None]:
        """``raw`` and its parse, each call of a name offered for another tool naming that tool, and
        each call without an id given one none of the message's holds (:func:`ids_apart`)."""
        if parsed is not None and parsed.error is None:  # the run is read only when an id is minted
            nodes = iter(lambda: next(self.rt.run_state(self.run_id).nodes), -1)
            parsed = ids_apart(parsed, f"{self.run_id}:", nodes)
        names = self._provider_names()
        if not names.renamed:
            return raw, parsed
        if isinstance(raw, ToolCall):
            return names.called(raw), parsed
        read = parsed if parsed is not None else parse(raw)
        calls = tuple(names.called(c) for c in read.calls)
        if all(a is b for a, b in zip(calls, read.calls, strict=True)):
            return raw, parsed
        return raw, dataclasses.replace(read, calls=calls)

    def _every_tool(self) -> frozenset[str]:
        """Every offerable tool's name but ``read_artifact``, the same set object until the catalog
        changes (the offer's selection keeps what a set of names selects by the set)."""
        catalog = self.rt.catalog
        generation, names = self._every_name
        if generation != catalog.generation:
            generation = catalog.generation
            names = frozenset(s.name for s in catalog.offerable() if s.name != READ_ARTIFACT)
            self._every_name = (generation, names)
        return names

    def handle(self, model_output: Any, *, confidence: Confidence = None, dry_run: bool = False) -> Turn:
        """Check and run every call the model proposed; one observation and one result per call.

        ``model_output`` is the output in any shape :func:`~actionspace.parse.parse` reads, the
        :class:`~actionspace.parse.StreamParser` that read it (its whole :meth:`output`: a message
        the provider cut off runs none of its calls) or the ``ParseResult`` of it (recorded as its
        ``to_dict()``; a failed one answers each call id it knows, else once under ``<run>:parse``).

        ``confidence`` (0–1, one for all calls or call id → value) feeds :attr:`gate` when set.
        ``dry_run``: each call is checked up to the gates and its tool's preview answers instead
        of the tool (``diagnostics["dry_run"]``); nothing is committed. Raises ConfigurationError
        once the runtime is closed, or for a ``confidence`` that is no number within [0, 1].
        """
        read = self._read(model_output, confidence)
        if isinstance(read, Turn):
            return read
        model_output, parsed, own = read
        with self._gating(confidence):
            out = self.rt.engine.calls(
                model_output, run_id=self.run_id, principal=self.principal, dry_run=dry_run, parsed=parsed
            )
        return self._turn(parsed, out, own)

    async def ahandle(
        self, model_output: Any, *, confidence: Confidence = None, dry_run: bool = False
    ) -> Turn:
        """Async :meth:`handle`: the calls of the message run together where their read/write
        sets commute and no decision can differ, and are answered in the message's order."""
        read = self._read(model_output, confidence)
        if isinstance(read, Turn):
            return read
        model_output, parsed, own = read
        with self._gating(confidence):
            out = await self.rt.engine.acalls(
                model_output, run_id=self.run_id, principal=self.principal, dry_run=dry_run, parsed=parsed
            )
        return self._turn(parsed, out, own)

    def _read(
        self, model_output: Any, confidence: Confidence
    ) -> Turn | tuple[Any, ParseResult | None, set[str] | None]:
        """The turn of a plain answer or of a message over :attr:`max_calls` (one malformed too goes on,
        its ``parse_error`` naming the bound); else the output given, as the engine reads it, parsed.
        Raises ConfigurationError once the runtime is closed, or for a wrong ``confidence``."""
        if self.rt.engine.runs.closed:
            raise closed_error()
        checked_confidence(confidence)  # the caller's mistake: raised before the message is taken in
        model_output, parsed = handed(model_output)
        if parsed is not None and parsed.error is None and not parsed.calls:
            return Turn((), [], parsed.content, parsed.refusal, parsed.stop_reason)  # a plain answer
        own = owned(model_output, parsed) if self.provider == "gemini" else None  # the model's own ids
        model_output, parsed = self._named(model_output, parsed)  # ids apart before any is answered
        if parsed is not None and (refused := too_many(parsed, self.max_calls, self.run_id)):
            if not isinstance(refused, ParseResult):  # recorded as a malformed message is
                refused = recorded_refusal(self.rt.engine, self.run_id, model_output, parsed, refused)
                return self._turn(parsed, refused, own)
            parsed = refused
        return model_output, parsed, own

    def _gating(self, confidence: Confidence) -> contextlib.AbstractContextManager[None]:
        """The calls of this handling judged by :attr:`gate` (none when it is None)."""
        if self.gate is None:
            return contextlib.nullcontext()
        return gating(self.rt.engine, self.rt.ledger, self.run_id, self.gate, confidence)

    def _turn(self, parsed: ParseResult | None, out: Sequence[Observation], own: set[str] | None) -> Turn:
        closed = self.rt.engine.runs.closed
        if closed:  # the calls ran while the runtime closed
            out = ended_by_close(out, self.rt, self.run_id)
        answered = once_per_id(out)
        reads = not closed and self._reads_artifacts(answered)
        names = self._provider_names()
        shown = [names.shown(o) for o in answered] if names.renamed else answered
        messages = render_results(shown, self.provider, read_artifact=reads, own_ids=own)
        rendered = {
            "rendering": RENDERING,
            "provider": self.provider,
            "results": [o.call_id for o in answered],
        }
        try:
            self.rt.record(self.run_id, "rendered", rendered)
        except Exception:  # the run's state could not be saved: each call already answers transient
            _log.exception("actionspace: a turn's rendering did not save the state of run %s", self.run_id)
            with contextlib.suppress(Exception):  # what the model is handed is traced all the same
                if not self.rt.engine.runs.closed:  # (a closed runtime's stores take nothing more)
                    rec = Recorder(self.rt.run_state(self.run_id), None)
                    rec.add("rendered", rendered)
                    self.rt.engine.messages.trace_only(rec)
        said = () if parsed is None else (parsed.content, parsed.refusal, parsed.stop_reason)
        return Turn(tuple(out), messages, *said)

    def _reads_artifacts(self, answered: Sequence[Observation]) -> bool:
        """Whether ``read_artifact`` is (or will be, once offered) allowed to this session's principal."""
        if not any(o.artifact_ref or any(i.artifact_ref for i in o.items) for o in answered):
            return True  # no hint to word
        spec = self.rt.catalog.current(READ_ARTIFACT)
        scopes = spec.scopes if spec is not None and spec.scopes is not None else (f"read:{READ_ARTIFACT}",)
        principal = self.principal or self.rt.run_state(self.run_id).principal
        return not principal.missing(scopes)

    def _read_artifact(self) -> None:
        if self.rt.catalog.current(READ_ARTIFACT) is not None:
            return
        with contextlib.suppress(DuplicateToolError):  # another session registered it first
            self.rt.register(read_artifact_tool(self.rt.artifacts))
        self.rt.engine.add_stage(ArtifactGate(self.rt.catalog), after="flow")


class ArtifactGate:
    """``read_artifact`` reads only artifacts its run was shown, as the read that produced them.

    A ref the run never saw is ``invalid_arguments``; a principal not authorized for the producing
    tool gets ``permission_denied``, as does one without the ``"*"`` scope once the producing
    version was dropped from the catalog (its scopes cannot be checked); the result carries the
    producing call's label (a secret read stays secret when read back through its artifact). A
    stage after the flow gate.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def __call__(self, inp: CallInput, draft: Draft) -> ActionError | None:
        if draft.spec is None or draft.spec.name != READ_ARTIFACT or draft.checked is None:
            return None
        ref = draft.checked.arguments.get("ref")
        shown = inp.run.flow.artifacts.get(ref) if isinstance(ref, str) else None
        if shown is None:
            error = FieldError(path="/ref", message="not an artifact this run was shown")
            return ActionError.of(
                "invalid_arguments",
                "read_artifact reads only the artifact_ref of a result shown in this run",
                field_errors=(error,),
            )
        producer_key, label = shown
        producer = self.catalog.find(producer_key)
        if producer is None and "*" not in inp.principal.scopes:  # its scopes are unknown now
            return ActionError.of(
                "permission_denied",
                f"the tool that produced this artifact, {producer_key}, is no longer in the catalog: "
                f"whether principal {inp.principal.id!r} may read its output cannot be checked",
                details={"tool": producer_key, "principal": inp.principal.id},
            )
        if producer is not None:
            allowed = authorize(producer, inp.principal)
            if isinstance(allowed, Rejected):
                return allowed.error
        draft.label = label if draft.label is None else draft.label.join(label)
        return None

    def __eq__(self, other: object) -> bool:  # one gate per engine, however many sessions ask
        return isinstance(other, ArtifactGate) and other.catalog is self.catalog

    def __hash__(self) -> int:
        return id(self.catalog)
