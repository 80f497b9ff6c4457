"""Runtime: composes the catalog, the stores, the call engine (``rt.engine``: every call goes through it),
discovery and the planner (wired in ``_assembly``); ``session`` is the documented way to drive a model."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from actionspace import _closing, _session_output
from actionspace._assembly import Parts, assemble
from actionspace.catalog import ToolSpec, as_spec, spec_from_function, spec_from_schema
from actionspace.catalog.functions import TOOL_ATTRIBUTE, TS, F, ToolSource, tool
from actionspace.discovery.config import Discovery, DiscoveryConfig
from actionspace.discovery.runs import RunState
from actionspace.execution.cache import ReadCache
from actionspace.execution.loop import run_on_own_loop
from actionspace.execution.streaming import StreamPolicy
from actionspace.ledger.admin import DEFAULT_RETENTION_S
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.recover import RecoveryReport
from actionspace.observation import ArtifactStore
from actionspace.parse import parse, user_text
from actionspace.pipeline.runs import check_id
from actionspace.pipeline.stages import Stage
from actionspace.pipeline.streaming import astream
from actionspace.plan import CancelScope, Plan, PlanResult, ToolLimit
from actionspace.plan.groups import Environment
from actionspace.policy import DEFAULT_FLOW_POLICY, Budget, Budgets, FlowPolicy, Label, Principal
from actionspace.policy.budget import estimate_calls
from actionspace.policy.labels import PUBLIC_TRUSTED
from actionspace.session import Provider, Session
from actionspace.trace.recorder import Recorder
from actionspace.types import SYSTEM_CLOCK, Clock, Observation, ToolCall

__all__ = ["DEFAULT_PRINCIPAL", "DEFAULT_RETENTION_S", "TOOL_ATTRIBUTE", "Runtime", "tool"]

DEFAULT_PRINCIPAL = Principal(id="local", scopes=("*",))
"""Used when neither the call nor the Runtime names a principal: may call every tool."""
_NO_OCCURRENCE = 0
"""``acall``'s default ``occurrence``, compared by identity: any other zero takes the general path."""


class Runtime:
    """Stands between a model and its tools. Thread-safe; usable from sync and async code.

    ``store``: ``"memory://"`` (the default), ``"sqlite:///relative.db"`` / ``"sqlite:////abs/path.db"``
    (SQLAlchemy's convention) or ``"postgresql://…"``. ``principal``: the default principal of calls that name
    none. ``state``: handles to live services that business validators read (``ctx.state``). ``budgets``:
    limits every call must fit (a Budget, several combined with ``&``, or a list; all apply). ``cache``: the
    read cache for tools with ``cache_ttl`` / ``cache_static`` (default: a 1024-entry in-memory LRU, made when
    first needed). ``plan_backend``: how ``run_plan`` runs plans by default, ``"inprocess"`` (the default) or
    ``"dbos"`` (durable workflows, :mod:`actionspace.durable`; needs a ``postgresql://`` store). ``durable``:
    the ``DurableConfig`` of the dbos backend (default: its defaults). ``flow_policy``: the information-flow
    policy of the authorize stage (default ``DEFAULT_FLOW_POLICY``; None checks nothing but still labels
    observations). ``discovery``: how offers are built (progressive disclosure, availability, rank cut,
    embeddings; see :class:`~actionspace.discovery.DiscoveryConfig`). ``stages``: extra stages (see
    :mod:`actionspace.pipeline.stages`), run after validation and before the gates. ``clock``: where approval
    expiry reads the time (default the system clock; tests pass a ``ManualClock``).
    """

    def __init__(
        self,
        store: str | None = None,
        *,
        principal: Principal | None = None,
        artifacts: ArtifactStore | str | Path | None = None,
        state: Mapping[str, Any] | None = None,
        tools: Iterable[ToolSpec | Callable[..., Any]] = (),
        max_threads: int = 32,
        recover_on_start: bool = True,
        budgets: Budget | Budgets | Iterable[Budget] | None = None,
        cache: ReadCache | None = None,
        plan_backend: str = "inprocess",
        durable: Any = None,
        flow_policy: FlowPolicy | None = DEFAULT_FLOW_POLICY,
        discovery: DiscoveryConfig | None = None,
        stages: Iterable[Stage] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock, self.store_url, self._closed = clock, store or "memory://", False
        self.state: dict[str, Any] = dict(state or {})
        self._assembled = parts = assemble(
            self, self.store_url, principal=principal or DEFAULT_PRINCIPAL, artifacts=artifacts,
            max_threads=max_threads, recover_on_start=recover_on_start, budgets=budgets, cache=cache,
            plan_backend=plan_backend, durable=durable, flow_policy=flow_policy, stages=stages, clock=clock,
        )  # fmt: skip
        self.trace, self.ledger, self.artifacts = parts.trace, parts.ledger, parts.artifacts
        self.catalog, self.meter, self.approvals = parts.catalog, parts.meter, parts.approvals
        self.engine, self.planner = parts.engine, parts.planner
        self._default_run: str | None = None
        for item in tools:
            self.register(item)
        self.discovery = Discovery(discovery or DiscoveryConfig())

    @property
    def _parts(self) -> Parts:
        """What the methods delegate to; raises ConfigurationError once the runtime is closed."""
        return _closing.refuse_closed() if self._closed else self._assembled

    @overload
    def tool(self, fn: F, /, **spec: Any) -> F: ...
    @overload
    def tool(self, fn: None = None, /, **spec: Any) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, **spec: Any) -> F | Callable[[F], F]:
        """Register a typed function as a tool: ``@rt.tool(effect="read")`` (``effect`` is required). The
        input schema comes from the type hints and the docstring's ``Args:``; options are ToolSpec fields."""
        if fn is None:
            self._closed and _closing.refuse_closed()
            return lambda f: self.tool(f, **spec)
        self.register(spec_from_function(fn, **spec))
        return fn

    def add_tool(
        self, *, name: str, input_schema: Mapping[str, Any], fn: Callable[..., Any], **spec: Any
    ) -> ToolSpec:
        """Register a tool known by its JSON Schema (MCP, OpenAPI, BFCL); ``effect`` is required."""
        return self.register(spec_from_schema(name, input_schema, fn, **spec))

    def register(self, spec: ToolSpec | Callable[..., Any]) -> ToolSpec:
        """Register a ToolSpec, or a function decorated with :func:`actionspace.tool`. The schema is compiled
        now, so a bad schema raises here, not at the first call."""
        spec = as_spec(spec)
        self._parts.compiler.get(spec)
        return self.catalog.register(spec)

    @property
    def principal(self) -> Principal:
        """The principal of calls and runs that name none."""
        return self.engine.default_principal

    @principal.setter
    def principal(self, principal: Principal) -> None:
        self.engine.default_principal = principal

    @property
    def flow_policy(self) -> FlowPolicy | None:
        """The information-flow policy of the flow stage (None: labels are stamped, nothing blocked)."""
        return self.engine.stages.flow_policy

    @flow_policy.setter
    def flow_policy(self, policy: FlowPolicy | None) -> None:
        self.engine.stages.flow_policy = policy

    def resource(self, kind: str, current_version: Callable[[str], str | None]) -> None:
        """Tell the validator how to read the current version of resources of ``kind``."""
        self._parts.versions.add(kind, current_version)

    def run_state(self, run_id: str | None = None, principal: Principal | None = None) -> RunState:
        """The state of a run (the default run when ``run_id`` is None), opened on first use."""
        self._closed and _closing.refuse_closed()
        if run_id is None:
            run_id = self._default_run = self._default_run or self.new_run()
        return self.engine.run(run_id, principal)

    def run_id_of(self, run_id: str | None = None, *, principal: Principal | None = None) -> str:
        """The id of ``run_id`` (the default run when None), opening the run on first use."""
        return self.run_state(run_id, principal).run_id

    def new_run(self, run_id: str | None = None, *, principal: Principal | None = None) -> str:
        """Start a run (or resume one by id) and return its id."""
        return self.run_id_of(
            f"run_{uuid.uuid4().hex[:16]}" if run_id is None else run_id, principal=principal
        )

    def finish(self, run_id: str, *, status: str = "ok", **data: Any) -> None:
        """Record the end of a run; its state leaves memory (kept in the store, read back on use)."""
        self.record(run_id, "run_finished", {"status": status, **data})
        self.engine.forget(run_id)

    def record(self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None) -> None:
        """Append an event of another stage (for example ``verified``) to a run's trace."""
        self.engine.record(self.run_state(run_id).run_id, kind, data, call_id=call_id)

    def session(
        self,
        run_id: str | None = None,
        *,
        provider: Provider = "openai_chat",
        principal: Principal | None = None,
        offer: Mapping[str, Any] | None = None,
    ) -> Session:
        """A :class:`~actionspace.session.Session` over one run: the documented way to drive a model loop.
        ``provider``: ``"openai_chat"``, ``"openai_responses"`` or ``"anthropic"``; ``offer``: keyword
        arguments of :meth:`offer` for every turn (default: every tool)."""
        return Session(
            self, self.new_run(principal=principal) if run_id is None else run_id, provider, principal, offer
        )

    async def asession(
        self,
        run_id: str | None = None,
        *,
        provider: Provider = "openai_chat",
        principal: Principal | None = None,
        offer: Mapping[str, Any] | None = None,
    ) -> Session:
        """:meth:`session` from async code: a run on disk or on a server is made (or read back) on a
        worker thread, so the event loop serves the other conversations while the store writes."""
        make = functools.partial(self.session, run_id, provider=provider, principal=principal, offer=offer)
        return make() if self.engine.runs.in_memory else await asyncio.to_thread(make)

    def call_all(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Observation]:
        """Every call in ``raw`` (any accepted format), in order; one observation each."""
        run_id = self.run_id_of(run_id, principal=principal)
        out = self.engine.calls(
            raw, run_id=run_id, principal=principal, provenance=provenance, sources=sources
        )
        return _session_output.answered_once(_closing.ended_by_close(out, self, run_id))  # an id once

    def call(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
        occurrence: int = 0,
    ) -> Observation:
        """Check and run one proposed call; returns its Observation (errors are values, not raised).

        ``dry_run``: the call passes the stages up to the gates (resolve, authorize, validate, the user
        stages), then the tool's ``preview`` runs instead: ``data`` is the preview, ``diagnostics["dry_run"]``
        is True; no ledger entry, no effect. ``fresh``: a read is not served from the read cache (its new
        result is cached); a committed write drops the cached reads whose read set its write set overlaps.
        ``node_id`` names the logical action within the run (default: node identity — the same tool, arguments
        and turn are one action). Several calls in ``raw`` come back grouped in ``items``, each answering the
        model's own call id. ``sources`` binds arguments to ``"user"`` or earlier call ids (policy/flow).
        ``occurrence``: how many calls identical to this one (same tool, same normalized arguments) came
        before it in its model message, when a message's calls run one at a time (a framework's tools node):
        the n-th is its own action, as in a message of several calls, and a re-run of the message replays
        each. 0 (the default) for the first; ignored with ``node_id`` or several calls; ConfigurationError
        unless a non-negative int."""
        self._closed and _closing.refuse_closed()
        run_id = self.run_id_of(None, principal=principal) if run_id is None else run_id
        with self.engine.messages.in_flight:  # close() waits for it; closed meanwhile: _closing.answered
            out = self.engine.calls(
                raw, run_id=run_id, node_id=node_id, principal=principal, provenance=provenance,
                sources=sources, dry_run=dry_run, fresh=fresh, occurrence=occurrence,
            )  # fmt: skip
            return out[0] if len(out) == 1 and not self._closed else _closing.answered(out, self, run_id)

    async def acall(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        dry_run: bool = False,
        fresh: bool = False,
        occurrence: int = 0,
    ) -> Observation:
        """Async :meth:`call` (``occurrence`` as there): async tools are awaited, blocking sync tools run on a
        worker thread."""
        self._closed and _closing.refuse_closed()
        if run_id is None:
            run_id = self._default_run or self.run_id_of(None, principal=principal)
        elif type(run_id) is not str:
            check_id("run id", run_id)  # a TypeError before a run's lookup could give another
        if occurrence is _NO_OCCURRENCE and not (provenance or sources or dry_run or fresh):
            quick = self.engine.quick(raw, run_id, node_id, principal)  # no coroutine while nothing waits
            if type(quick) is not Observation and quick is not None and not isinstance(quick, Observation):
                quick = await quick
            if quick is not None:
                return _closing.ended_by_close([quick], self, run_id)[0] if self._closed else quick
        out = await self.engine.acalls(
            raw, run_id=run_id, node_id=node_id, principal=principal, provenance=provenance, sources=sources,
            dry_run=dry_run, fresh=fresh, occurrence=occurrence,
        )  # fmt: skip
        return _closing.answered(out, self, run_id)

    async def acall_all(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Observation]:
        """Async :meth:`call_all`; a message's calls run together where nothing can differ (docs/plans.md)."""
        run = self.run_state(run_id, principal)
        out = await self.engine.acalls(
            raw, run_id=run.run_id, principal=principal, provenance=provenance, sources=sources
        )
        return _session_output.answered_once(_closing.ended_by_close(out, self, run.run_id))

    def astream(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        policy: StreamPolicy | None = None,
    ) -> AsyncGenerator[Observation, None]:
        """Run ``raw``'s calls, yielding a streaming tool's provisional observations as they come. Each
        call ends with exactly one final observation (``provisional=False``); only that one may feed another
        action. ``policy``: how often provisional ones come (an ``execution.streaming.StreamPolicy``)."""
        run_id = self.run_id_of(run_id, principal=principal)
        policy = policy or StreamPolicy()
        stream = astream(self.engine, raw, run_id=run_id, node_id=node_id, principal=principal, policy=policy)
        return _closing.ended_stream(stream, self)

    def user_input(
        self, run_id: str, text: str | Sequence[Any] | Mapping[str, Any], *, label: Label = PUBLIC_TRUSTED
    ) -> None:
        """Record the user's request (or a later message) in a run: trusted content by default. It joins the
        run's context label, and ``sources={"arg": ["user"]}`` on a later call binds an argument to it (the
        value must occur in the text). Traced as ``user_input``."""
        text = user_text(text)  # a string, or content parts: checked before anything changes
        run = self.run_state(run_id)
        run.flow.add_user_input(text, label)
        rec = Recorder(run, None)
        rec.add("user_input", {"text": text[:2000], "chars": len(text), "input_label": label.to_dict()})
        self.engine.flush(rec)

    def context_label(self, run_id: str) -> Label:
        """The join of everything the model was shown in ``run_id`` (see policy/flow.py)."""
        return self.run_state(run_id).flow.context

    def offer(
        self,
        names: Iterable[str] | None = None,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        query: str | None = None,
        limit: int | None = None,
        phase: str | None = None,
        capabilities: Iterable[str] | None = None,
        errors: Iterable[str] = (),
        disclosure: bool | None = None,
    ) -> list[dict[str, Any]]:
        """Fix the tools a run may call and return their definitions, best first.

        The set is built by :mod:`actionspace.discovery.candidates`: not retired, among ``names`` (default:
        every tool), in ``phase``, needing only ``capabilities`` (None: all present), recovery tools only
        after their error occurred in the run (or is named in ``errors``), ranked against ``query`` (BM25,
        plus embeddings when configured), then — always after ranking — only tools the principal (default: the
        run's) holds every scope of, and at most ``limit`` of them (default: the configured limit when a query
        is given). ``disclosure`` (default: the runtime's setting) returns short definitions (name, summary,
        effect, risk) plus ``describe_tool``; a tool must then be described before it is called. Otherwise
        each tool's full ``ToolSpec.describe()``. Records ``candidates_offered``: the full set, the offered
        set, why each other tool was left out (large catalogs: :mod:`actionspace.trace.offers`).
        """
        return self._parts.offers.offer(
            self.discovery,
            self.run_state(run_id, principal),
            principal,
            errors,
            names=names,
            query=query,
            limit=limit,
            phase=phase,
            capabilities=capabilities,
            disclosure=disclosure,
        )

    def describe(self, name: str, *, run_id: str | None = None) -> dict[str, Any]:
        """The definition of a tool, as the model may see it. Without ``run_id``: the current version's
        ``ToolSpec.describe()``. With it: the full definition (schemas, examples) of the version offered to
        that run, recorded as a ``described`` event; in a disclosure run this is what lets the tool be called.
        Raises UnknownToolError for a tool not registered (or, with ``run_id``, not offered to the run)."""
        return self._parts.offers.describe(name, run_id)

    def environment(self, name: str, env: Environment) -> None:
        """Register a transactional environment that atomic plan groups can use (``ToolSpec.transaction``):
        ``env`` speaks :class:`~actionspace.plan.groups.Environment` (``mode``, ``begin``, ``committed``)."""
        self._parts.planner.environment(name, env)

    @property
    def plan_backend(self) -> str:
        """Where ``run_plan`` runs plans by default: ``"inprocess"`` or an installed backend (``"dbos"``)."""
        return self.planner.backend

    @property
    def durable(self) -> Any:
        """The configuration of the durable backend (a ``DurableConfig``; None: its defaults)."""
        return self.planner.config

    @property
    def environments(self) -> Mapping[str, Environment]:
        """The transactional environments registered with :meth:`environment`, by name."""
        return self.planner.environments

    async def arun_plan(
        self,
        plan: Plan | Mapping[str, Any],
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        max_concurrency: int | None = None,
        tool_limits: Mapping[str, int | ToolLimit] | None = None,
        cancel: CancelScope | None = None,
        retry_of: PlanResult | None = None,
        backend: str | None = None,
    ) -> PlanResult:
        """Check and run a plan (a :class:`Plan` or its JSON form); one observation per node.

        ``tool_limits``: per tool name, the most concurrent calls (an int) or a :class:`ToolLimit`.
        ``cancel``: a :class:`CancelScope` to stop the plan or some nodes. ``retry_of``: an earlier result of
        the same plan and run; its ok nodes are reused, the others run again (writes through the ledger, with
        their original keys). A malformed or unsafe plan is a result with ``status="error"`` and ``error`` set
        (nothing ran). ``backend``: ``"inprocess"`` or an installed backend such as ``"dbos"`` (a durable
        workflow; see :mod:`actionspace.durable`, which takes no ``tool_limits`` or ``retry_of``); default:
        the Runtime's ``plan_backend``.
        """
        in_process = (backend or self.planner.backend) == "inprocess"
        run_id = self.run_state(run_id, principal).run_id if in_process else run_id
        run = self._parts.planner.arun(
            plan,
            run_id=run_id,
            principal=principal,
            max_concurrency=max_concurrency,
            tool_limits=tool_limits,
            cancel=cancel,
            retry_of=retry_of,
            backend=backend,
        )
        return await _closing.plan_run(run, self, in_process=in_process)  # rewritten if the runtime closed

    def run_plan(self, plan: Plan | Mapping[str, Any], **options: Any) -> PlanResult:
        """Sync :meth:`arun_plan` (runs its own event loop; from async code use ``arun_plan``)."""
        misuse = "run_plan was called inside a running event loop; await rt.arun_plan(...)"
        return run_on_own_loop(lambda: self.arun_plan(plan, **options), misuse=misuse)

    def budget(self, *, run_id: str | None = None, principal: Principal | None = None) -> dict[str, float]:
        """What the budgets still allow per limited unit (the least over every applicable budget; {} if none).
        Per-run budgets count only with ``run_id``; ``principal``: the run's, else the runtime's."""
        if (meter := self._parts.meter) is None:
            return {}
        run = self.engine.known_run(run_id) if run_id is not None else None
        who = principal or (run.principal if run is not None else self.principal)
        return meter.remaining(run_id, (who.id, who.tenant))

    def estimate(
        self, raw: Any, *, run_id: str | None = None, principal: Principal | None = None
    ) -> dict[str, Any]:
        """``{"estimate", "remaining", "fits"}`` for the calls in ``raw``, before running them: the most the
        calls can use (:func:`actionspace.policy.budget.estimate`, summed); tool names resolve to their
        current version. Nothing is recorded. Raises UnknownToolError for a tool that is not registered."""
        remaining = self.budget(run_id=run_id, principal=principal)
        total = estimate_calls(self.catalog, [raw] if isinstance(raw, ToolCall) else parse(raw).calls)
        return {"estimate": total.to_dict(), "remaining": remaining, "fits": total.fits(remaining)}

    def add_mcp_server(self, server: ToolSource[TS]) -> TS:
        """Connect an MCP server and register its tools; ``close()`` closes it. Trust, versions, errors:
        :mod:`actionspace.adapters.mcp_client`. Raises ConfigurationError if the server cannot be reached."""
        return self._parts.toolsets.add(server)

    async def aadd_mcp_server(self, server: ToolSource[TS]) -> TS:
        """Async :meth:`add_mcp_server`."""
        return await self._parts.toolsets.aadd(server)

    def recover(self, *, min_age_s: float = 0.0) -> RecoveryReport:
        """Settle every ``dispatched`` / ``unknown`` ledger entry through its status query (sends nothing).
        ``min_age_s`` skips entries touched more recently (a live process may hold them); start-up: 30 s."""
        return self._parts.ledger_admin.recover(min_age_s=min_age_s)

    def purge(self, *, retention_s: float = DEFAULT_RETENTION_S) -> int:
        """Delete settled ledger entries older than ``retention_s`` (default 24 h); never unresolved ones."""
        return self._parts.ledger_admin.purge(retention_s=retention_s)

    def resolve(self, key: str, *, outcome: str, by: str, reason: str) -> LedgerEntry:
        """Reconcile an ``unknown_commit`` by hand (``committed`` or ``failed``); the decision is traced."""
        return self._parts.ledger_admin.resolve(key, outcome=outcome, by=by, reason=reason)

    def close(self, *, wait: bool = False) -> None:
        """Release threads and stores; ``wait`` lets timed-out tool calls finish first. Idempotent."""
        if not self._closed:
            self._closed = self.engine.runs.closed = True
            self._assembled.close(wait=wait, before=functools.partial(_closing.note_cut_writes, self.engine))

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
