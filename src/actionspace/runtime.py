"""Runtime: the facade that wires catalog, parse, validate, authorize, execute, observe and trace."""

from __future__ import annotations

import itertools
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from actionspace._calls import group, open_ledger_stores, open_stores, parse_raw
from actionspace._pipeline import Compiler, Ready, Recorder, RunState, context_factory, record_sink
from actionspace._runtime_exec import Execution
from actionspace._runtime_ops import Operations
from actionspace.approval.gate import Approvals
from actionspace.catalog.functions import spec_from_function
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.config import Discovery, DiscoveryConfig
from actionspace.discovery.disclosure import describe_event, described_spec, full_definition
from actionspace.errors import ConfigurationError
from actionspace.execution.cache import ReadCache, cacheable
from actionspace.execution.executor import Executor
from actionspace.execution.guarded import Guard
from actionspace.observation import ArtifactStore, FolderArtifactStore
from actionspace.plan.groups import Environment
from actionspace.policy.budget import Budget, Budgets, Meter
from actionspace.policy.flow import DEFAULT_FLOW_POLICY, FlowPolicy
from actionspace.policy.principal import Principal
from actionspace.types import Observation

__all__ = ["DEFAULT_PRINCIPAL", "TOOL_ATTRIBUTE", "Runtime", "tool"]

F = TypeVar("F", bound=Callable[..., Any])

_log = logging.getLogger("actionspace")

TOOL_ATTRIBUTE = "__actionspace_tool__"

STARTUP_RECOVERY_AGE_S = 30.0
"""Start-up recovery leaves entries younger than this to the live process that may hold them."""

DEFAULT_PRINCIPAL = Principal(id="local", scopes=("*",))
"""Used when neither the call nor the Runtime names a principal: may call every tool."""


class Runtime(Execution, Operations):
    """Stands between a model and its tools. Thread-safe; usable from sync and async code.

    ``store``: ``"memory://"``, ``"sqlite:///path.db"`` (the default comes from
    ``ACTIONSPACE_STORE`` or ``~/.actionspace/actionspace.db``). ``principal``: the default
    principal of calls that name none. ``state``: handles to live services that business
    validators read (``ctx.state``). ``budgets``: limits every call must fit (a Budget, several
    combined with ``&``, or a list; all apply). ``cache``: the read cache for tools with
    ``cache_ttl`` / ``cache_static`` (default: a 1024-entry in-memory LRU, made when first needed).
    ``plan_backend``: how ``run_plan`` runs plans by default, ``"inprocess"`` (the default) or
    ``"dbos"`` (durable workflows, :mod:`actionspace.durable`; needs a ``postgresql://`` store).
    ``durable``: the ``DurableConfig`` of the dbos backend (default: its defaults).
    ``flow_policy``: the information-flow policy of the authorize stage (default
    ``DEFAULT_FLOW_POLICY``; None checks nothing but still labels observations).
    ``discovery``: how offers are built (progressive disclosure, availability, rank cut,
    embeddings; see :class:`~actionspace.discovery.DiscoveryConfig`).
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
    ) -> None:
        if store is None:
            from actionspace.trace.store import default_store_url

            store = default_store_url()
        self.store_url = store
        self.trace, default_artifacts = open_stores(store)
        self._sink = record_sink(self.trace)
        self.ledger, approval_store = open_ledger_stores(store)
        self.approvals = Approvals(approval_store, self.record)
        self._recover_on_start = recover_on_start
        if plan_backend not in ("inprocess", "dbos"):
            raise ConfigurationError(f"plan_backend must be 'inprocess' or 'dbos', got {plan_backend!r}")
        self.plan_backend = plan_backend
        self.durable = durable  # a DurableConfig for the dbos backend (None: its defaults)
        if isinstance(artifacts, str | Path):
            artifacts = FolderArtifactStore(Path(artifacts))
        self.artifacts: ArtifactStore = artifacts if artifacts is not None else default_artifacts
        self.catalog = Catalog()
        self.principal = principal or DEFAULT_PRINCIPAL
        self.state: dict[str, Any] = dict(state or {})
        self._resource_versions: dict[str, Callable[[str], str | None]] = {}
        self._compiler = Compiler()
        self._executor = Executor(max_threads=max_threads)
        self._runs: dict[str, RunState] = {}
        self._runs_lock = threading.Lock()
        self._default_run: str | None = None
        self._environments: dict[str, Environment] = {}
        self._ctx = context_factory(self._resource_version, self.state)
        budget_set = Budgets.of(budgets)
        self.meter: Meter | None = Meter(budget_set) if budget_set else None
        self._cache = cache
        self.flow_policy = flow_policy
        self._guard: Guard | None = None if self.meter is None else Guard(meter=self.meter, cache=cache)
        self.catalog.on_change(self._compiler.forget)
        self.catalog.on_change(self._enable_cache)
        for item in tools:
            self.register(item)
        self.discovery = Discovery(discovery or DiscoveryConfig())

    # ------------------------------------------------------------------ tools
    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(self, fn: None = None, /, **spec: Any) -> Callable[[F], F]: ...

    def tool(self, fn: F | None = None, /, **spec: Any) -> F | Callable[[F], F]:
        """Register a typed function as a tool: ``@rt.tool(effect="read")``.

        The input schema comes from the type hints and the docstring's ``Args:`` section. Keyword
        options are ToolSpec fields; ``effect`` is required.
        """

        def register(f: F) -> F:
            self.register(spec_from_function(f, **spec))
            return f

        return register(fn) if fn is not None else register

    def add_tool(
        self, *, name: str, input_schema: Mapping[str, Any], fn: Callable[..., Any], **spec: Any
    ) -> ToolSpec:
        """Register a tool known by its JSON Schema (MCP, OpenAPI, BFCL); ``effect`` is required."""
        if "effect" not in spec:
            raise ConfigurationError(f"{name}: declare effect= ('none', 'read', 'write' or 'external')")
        return self.register(ToolSpec(name=name, input_schema=dict(input_schema), fn=fn, **spec))

    def register(self, spec: ToolSpec | Callable[..., Any]) -> ToolSpec:
        """Register a ToolSpec, or a function decorated with :func:`actionspace.tool`.

        The schema is compiled now, so a bad schema raises here, not at the first call.
        """
        if not isinstance(spec, ToolSpec):
            options = getattr(spec, TOOL_ATTRIBUTE, None)
            if options is None:
                raise ConfigurationError(f"{spec!r} is neither a ToolSpec nor decorated with @tool")
            spec = spec_from_function(spec, **options)
        if spec.fn is None:
            raise ConfigurationError(f"{spec.key}: a tool needs an implementation (fn=)")
        self._compiler.get(spec)
        return self.catalog.register(spec)

    def resource(self, kind: str, current_version: Callable[[str], str | None]) -> None:
        """Tell the validator how to read the current version of resources of ``kind``."""
        self._resource_versions[kind] = current_version

    def _resource_version(self, kind: str, rid: str) -> str | None:
        fn = self._resource_versions.get(kind)
        if fn is None:
            raise ConfigurationError(f"no resource version reader for kind {kind!r}; call rt.resource()")
        return fn(rid)

    # ------------------------------------------------------------------ runs and offers
    def _run(self, run_id: str | None, principal: Principal | None) -> RunState:
        if run_id is None:
            run_id = self._default_run or self.new_run()
            self._default_run = run_id
        run = self._runs.get(run_id)
        if run is None:
            if self._recover_on_start:
                # Once, at the first run: by then the tools are registered, so their status queries exist.
                self._recover_on_start = False
                self.recover(min_age_s=STARTUP_RECOVERY_AGE_S)
            with self._runs_lock:
                run = self._runs.get(run_id)
                if run is None:
                    start = self.trace.next_seq(run_id)
                    run = RunState(run_id, principal or self.principal, itertools.count(start))
                    self._runs[run_id] = run
                    if start == 0:
                        rec = Recorder(run, None)
                        rec.add("run_started", {"principal": run.principal.id})
                        self._flush(rec)
        return run

    def new_run(self, run_id: str | None = None, *, principal: Principal | None = None) -> str:
        """Start a run (or resume one by id) and return its id."""
        run_id = run_id or f"run_{uuid.uuid4().hex[:16]}"
        self._run(run_id, principal)
        return run_id

    def finish(self, run_id: str, *, status: str = "ok", **data: Any) -> None:
        """Record the end of a run."""
        run = self._run(run_id, None)
        rec = Recorder(run, None)
        rec.add("run_finished", {"status": status, **data})
        self._flush(rec)

    def record(self, run_id: str, kind: str, data: Mapping[str, Any], *, call_id: str | None = None) -> None:
        """Append an event of another stage (for example ``verified``) to a run's trace."""
        run = self._run(run_id, None)
        rec = Recorder(run, call_id)
        rec.add(kind, data)
        self._flush(rec)

    # ------------------------------------------------------------------ calls
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
        return self._call_sync(raw, run_id, None, principal, provenance, sources)[1]

    def call(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> Observation:
        """Check and run one proposed call; returns its Observation (errors are values, not raised).

        ``node_id`` names the logical action within the run (default: the next sequence number).
        When ``raw`` holds several calls the observation groups them in ``items``. ``sources``
        binds arguments to ``"user"`` and/or earlier call ids (checked; see policy/flow.py).
        """
        run, out = self._call_sync(raw, run_id, node_id, principal, provenance, sources)
        return out[0] if len(out) == 1 else group(out, run)

    async def acall(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> Observation:
        """Async :meth:`call`: async tools are awaited, blocking sync tools run on a worker thread."""
        run = self._run(run_id, principal)
        who = principal or run.principal
        rec = Recorder(run, None)
        try:
            calls = parse_raw(raw, rec)
            if isinstance(calls, Observation):
                return calls
            single = len(calls) == 1
            items = []
            for call in calls:
                node = node_id if single else None
                ready = self._prepare(run, call, node, who, provenance, rec, sources=sources)
                if isinstance(ready, Ready):
                    ready = await self._aexecute(ready, rec)
                run.flow.observed(ready)
                if single:
                    return ready
                items.append(ready)
            return group(items, run.run_id)
        except Exception as exc:
            return self._internal(exc, rec)
        finally:
            self._flush(rec)

    async def acall_all(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        principal: Principal | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
    ) -> list[Observation]:
        """Async :meth:`call_all`."""
        obs = await self.acall(
            raw, run_id=run_id, principal=principal, provenance=provenance, sources=sources
        )
        return list(obs.items) if obs.tool == "*" else [obs]

    def _flush(self, rec: Recorder) -> None:
        """Hand a call's events to the trace store; a failing store never turns into a failed call."""
        try:
            rec.flush(self._sink)
        except Exception:
            _log.exception(
                "actionspace: the trace store rejected %d events of run %s", len(rec.records), rec.run.run_id
            )
            rec.records = []

    def _enable_cache(self, spec: ToolSpec) -> None:
        """Give the runtime a read cache once a tool that may use it is registered."""
        if (self._guard is not None and self._guard.cache is not None) or not cacheable(spec):
            return
        if self._cache is None:
            self._cache = ReadCache()
        self._guard = Guard(meter=self.meter, cache=self._cache)

    def describe(self, name: str, *, run_id: str | None = None) -> dict[str, Any]:
        """The definition of a tool, as the model may see it.

        Without ``run_id``: the current version's ``ToolSpec.describe()``. With it: the full
        definition (schemas, examples) of the version offered to that run, recorded as a
        ``described`` event; in a disclosure run this is what lets the tool be called. Raises
        UnknownToolError for a tool not registered (or, with ``run_id``, not offered to the run).
        """
        if run_id is None:
            return self.catalog.get(name).describe()
        run = self._run(run_id, None)
        spec = described_spec(self.catalog.find, run, name)
        self.record(run_id, "described", describe_event(spec, via="host"))
        return full_definition(spec)

    def close(self, *, wait: bool = False) -> None:
        """Release threads and stores; ``wait`` lets timed-out tool calls finish first."""
        self._close_mcp()
        self._executor.close(wait=wait)
        self.ledger.close()
        self.approvals.store.close()
        self.trace.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(fn: None = None, /, **spec: Any) -> Callable[[F], F]: ...


def tool(fn: F | None = None, /, **spec: Any) -> F | Callable[[F], F]:
    """Mark a typed function as a tool, to be registered later (``Runtime(tools=[f])``).

    Takes the same options as :meth:`Runtime.tool`; ``effect`` is required. The function itself
    is returned unchanged, so it stays callable and testable on its own.
    """

    def mark(f: F) -> F:
        setattr(f, TOOL_ATTRIBUTE, dict(spec))
        return f

    return mark(fn) if fn is not None else mark
