"""How a Runtime is put together: its stores, catalog, call engine, stages and planner, wired once."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actionspace._closing import close_stores, close_when_nothing_runs, end_running_plans
from actionspace.approval.gate import Approvals
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.catalog.toolsets import Toolsets
from actionspace.discovery.artifacts import READ_ARTIFACT
from actionspace.discovery.offer import Offers
from actionspace.execution.cache import ReadCache, cacheable
from actionspace.execution.errors import map_exception
from actionspace.execution.executor import Executor
from actionspace.execution.guarded import Guard
from actionspace.ledger.admin import LedgerAdmin
from actionspace.ledger.budget_store import open_meter
from actionspace.ledger.commit import RECOVERY_AGE_S
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.liveness import hold
from actionspace.ledger.open import scheme_of
from actionspace.ledger.recover import anything_in_flight_here
from actionspace.ledger.run_state import open_run_states
from actionspace.observation import ArtifactStore, FolderArtifactStore, shape
from actionspace.pipeline.engine import Engine
from actionspace.pipeline.stages import Compiler, Stage, Stages, keep_evidence
from actionspace.pipeline.stores import open_ledger_stores, open_stores
from actionspace.plan.groups import SpecsWithGroups
from actionspace.plan.planner import Planner
from actionspace.policy.budget import Budget, Budgets, Meter
from actionspace.policy.flow import FlowPolicy
from actionspace.policy.principal import Principal
from actionspace.session import ArtifactGate
from actionspace.trace.events import TraceStore
from actionspace.trace.otel_live import live_sink
from actionspace.trace.recorder import record_sink
from actionspace.types import Clock
from actionspace.validation.context import ResourceVersions

if TYPE_CHECKING:
    from actionspace.runtime import Runtime

__all__ = ["STARTUP_RECOVERY_AGE_S", "Parts", "assemble"]

STARTUP_RECOVERY_AGE_S = RECOVERY_AGE_S
"""Start-up recovery leaves entries younger than this to the live process that may hold them (and
younger than their tool's ``holder_window``, :mod:`actionspace.ledger.recover`), unless no other
process of the store is alive."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """What a Runtime is made of: its public attributes and the parts its methods delegate to."""

    trace: TraceStore
    ledger: LedgerStore
    artifacts: ArtifactStore
    catalog: Catalog
    meter: Meter | None
    """None when no budgets are configured."""
    approvals: Approvals
    engine: Engine
    planner: Planner
    compiler: Compiler
    versions: ResourceVersions
    """The resource-version readers that validation contexts are built with."""
    offers: Offers
    toolsets: Toolsets
    ledger_admin: LedgerAdmin
    close_artifacts: Callable[[], object] | None = None
    """Closes the artifact store the store URL opened (PostgreSQL's pool); None: nothing to close."""
    release_mark: Callable[[], object] = lambda: None
    """Drops this process's mark on the store (ledger/liveness.py), once the ledger is closed."""

    def close(self, *, wait: bool, before: Callable[[], object] = lambda: None) -> None:
        """End the plans running in process, close the toolsets, the executor (``wait``: let
        timed-out tool calls finish), then call ``before``, then close the stores."""
        self.engine.executor.closed = True  # first: from here on no tool call begins
        end_running_plans(self.engine)  # then the plans running now cut their calls
        self.toolsets.close()
        self.engine.executor.close(wait=wait)
        before()
        close_stores(self.engine, self._close_stores)  # later for the calls and plans cut on this loop

    def _close_stores(self) -> None:
        self.ledger.close()
        self.release_mark()
        close_run_states = getattr(self.engine.runs.run_states, "close", None)
        if close_run_states is not None:  # while a cut call or plan still runs, it may save: after it
            close_when_nothing_runs(self.engine, close_run_states)
        self.approvals.store.close()
        if self.meter is not None:
            self.meter.close()
        if self.close_artifacts is not None:
            self.close_artifacts()
        self.trace.close()


def assemble(
    owner: Runtime,
    store: str,
    *,
    principal: Principal,
    artifacts: ArtifactStore | str | Path | None,
    max_threads: int,
    recover_on_start: bool,
    budgets: Budget | Budgets | Iterable[Budget] | None,
    cache: ReadCache | None,
    plan_backend: str,
    durable: Any,
    flow_policy: FlowPolicy | None,
    stages: Iterable[Stage],
    clock: Clock,
) -> Parts:
    """Open the stores ``store`` names and wire ``owner``'s parts (arguments as ``Runtime``'s).

    The parts call back ``owner.record`` (approvals, recovery); the first run opened recovers the
    ledger (unless ``recover_on_start`` is False), leaving what live processes may still hold.
    """
    trace, default_artifacts = open_stores(store)
    ledger, approval_store = open_ledger_stores(store)
    try:  # before any write: other processes see this one alive while it may hold a send
        release_mark = hold(ledger, store, scheme_of(store), busy=anything_in_flight_here)
    except BaseException:
        ledger.close()
        approval_store.close()
        raise
    if isinstance(artifacts, str | Path):
        artifacts = FolderArtifactStore(Path(artifacts))
    kept: ArtifactStore = artifacts if artifacts is not None else default_artifacts
    catalog = Catalog()
    versions = ResourceVersions(owner)
    budget_set = Budgets.of(budgets)
    # usage lives where the store is: every process sharing it shares the budgets
    meter = open_meter(store, budget_set) if budget_set else None
    compiler = Compiler()
    approvals = Approvals(approval_store, lambda *a, **k: owner.record(*a, **k), clock=clock)
    engine = Engine(
        catalog=catalog,
        ledger=ledger,
        artifacts=kept,
        executor=Executor(max_threads=max_threads, map_error=map_exception),
        trace=trace,
        sink=live_sink(record_sink(trace)),  # live OTel spans only when OTel is configured
        stages=Stages(
            catalog=catalog,
            compiler=compiler,
            ctx_factory=versions.context,
            approvals=approvals,
            flow_policy=flow_policy,
            guard=None if meter is None else Guard(meter=meter, cache=cache),
        ),
        default_principal=principal,
        run_states=open_run_states(store),
        # other processes sharing the store may still run what they dispatched: left to them
        on_first_run=(
            (lambda: ledger_admin.recover(min_age_s=STARTUP_RECOVERY_AGE_S, live_holders=True))
            if recover_on_start
            else None
        ),
    )
    planner = Planner(engine, backend=plan_backend, config=durable, owner=owner)
    for stage in stages:
        engine.add_stage(stage)
    catalog.on_change(compiler.forget)
    catalog.on_change(partial(_gate_artifact_reads, engine, catalog))  # however read_artifact comes
    catalog.on_change(_ReadCacheSwitch(engine, meter, cache).enable)
    # a result settled by recovery is shaped like any other (trimmed, its artifact stored)
    ledger_admin = LedgerAdmin(
        ledger,
        specs=_recovery_specs(catalog, planner),
        record=owner.record,
        shape=partial(shape, artifacts=kept),
        clock=clock,
    )
    engine.driver.settle = ledger_admin.recover_key  # an entry whose holder is gone, found by a proposal
    engine.driver.executor, engine.driver.flush = engine.executor, engine.flush  # close; late answers traced
    engine.stages.keep = partial(keep_evidence, engine.flush, trace)  # its evidence stored before a request
    return Parts(
        trace=trace,
        ledger=ledger,
        artifacts=kept,
        catalog=catalog,
        meter=meter,
        approvals=approvals,
        engine=engine,
        planner=planner,
        compiler=compiler,
        versions=versions,
        offers=Offers(catalog, trace, open_run=engine.run, known_run=engine.known_run, record=owner.record),
        toolsets=Toolsets(owner),
        ledger_admin=ledger_admin,
        close_artifacts=getattr(default_artifacts, "close", None),
        release_mark=release_mark,
    )


def _recovery_specs(catalog: Catalog, planner: Planner) -> Callable[[], Catalog | SpecsWithGroups]:
    """Where recovery finds an entry's tool: with its atomic group's environment once any is registered."""

    def specs() -> Catalog | SpecsWithGroups:
        envs = planner.environments
        return SpecsWithGroups(catalog, envs) if envs else catalog

    return specs


def _gate_artifact_reads(engine: Engine, catalog: Catalog, spec: ToolSpec) -> None:
    """A catalog listener: once ``read_artifact`` is registered, it reads only what its run was shown."""
    if spec.name == READ_ARTIFACT:
        engine.add_stage(ArtifactGate(catalog), after="flow")


class _ReadCacheSwitch:
    """Gives the engine a read cache once a tool that may use it is registered (made then if none given)."""

    __slots__ = ("cache", "engine", "meter")

    def __init__(self, engine: Engine, meter: Meter | None, cache: ReadCache | None) -> None:
        self.engine = engine
        self.meter = meter
        self.cache = cache

    def enable(self, spec: ToolSpec) -> None:
        """A catalog listener: switch the read cache on for ``spec`` if it is cacheable and it is off."""
        guard = self.engine.stages.guard
        if (guard is not None and guard.cache is not None) or not cacheable(spec):
            return
        if self.cache is None:
            self.cache = ReadCache()
        self.engine.set_guard(Guard(meter=self.meter, cache=self.cache))
