"""What the plan scheduler needs of the call engine: its public interface, as a Protocol.

The scheduler sits below the engine (DESIGN §2): it is handed an engine (``Runtime.engine``)
instead of importing one, and only calls these methods.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol

from actionspace.catalog.registry import Catalog
from actionspace.discovery.runs import RunState
from actionspace.execution.executor import Executor, Outcome
from actionspace.execution.guarded import Guard
from actionspace.execution.ready import Ready
from actionspace.ledger.commit import Protocol as CommitProtocol
from actionspace.ledger.entries import LedgerStore
from actionspace.policy.flow import Binding
from actionspace.policy.principal import Principal
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall

__all__ = ["PlanEngine"]


class Gates(Protocol):
    """What a plan reads of the engine's gates: the budgets and read cache (None: neither applies)."""

    @property
    def guard(self) -> Guard | None: ...


class Runs(Protocol):
    """What a plan reads of the engine's runs: whether they are in memory, and the merge of a
    run's stored snapshot that another process saved (``pipeline/runs.py`` ``RunRegistry``)."""

    in_memory: bool

    async def arefresh(self, run: RunState) -> None: ...


class PlanEngine(Protocol):
    """The engine's methods a plan uses (see :class:`actionspace.pipeline.Engine`)."""

    catalog: Catalog
    ledger: LedgerStore
    executor: Executor
    writing: dict[str, None]
    """Keys of the writes in the ledger protocol; a runtime that closes notes them ``unknown``."""
    checked_plans: dict[int, object]
    """The checks of plan objects run over this engine, kept for a plan run again
    (``plan/_simple_plan.py`` ``keep``); held here so they go with the engine."""

    @property
    def runs(self) -> Runs:
        """The engine's runs (a plan merges its run's stored snapshot before each wave)."""
        ...

    @property
    def stages(self) -> Gates:
        """The gates every call passes; an atomic group checks its budget against them first."""
        ...

    def run(self, run_id: str, principal: Principal | None = None) -> RunState: ...

    async def aprepare(
        self,
        run: RunState,
        call: ToolCall,
        *,
        principal: Principal,
        rec: Recorder,
        node_id: str | None = None,
        provenance: Mapping[str, str] | None = None,
        sources: Mapping[str, Sequence[str]] | None = None,
        bound: Mapping[str, Binding] | None = None,
        occurrence: int = 1,
    ) -> Ready | Observation: ...

    def aexecute(self, ready: Ready, rec: Recorder) -> Coroutine[Any, Any, Observation]: ...

    async def anode(
        self, run: RunState, call: ToolCall, *, principal: Principal, rec: Recorder, node_id: str
    ) -> Observation: ...

    def plain_node(
        self,
        run: RunState,
        name: str,
        arguments: dict[str, Any],
        node_id: str,
        principal: Principal,
        rec: Recorder,
        kept: dict[str, Any] | None = None,
    ) -> Observation | Coroutine[Any, Any, Observation] | None:
        """A plain node's call on the precompiled path; None (nothing recorded): take :meth:`anode`.
        Called once per node, with positional arguments (no keyword parsing per node). ``kept``:
        the plan's own, empty at its start: its tools' entries, checked once per tool while
        nothing they were decided from changes (``actionspace._epoch``)."""
        ...

    def observe(
        self, ready: Ready, outcome: Outcome, rec: Recorder, *, keep_raw: bool = False
    ) -> Observation: ...

    def internal(self, exc: BaseException, rec: Recorder, call: ToolCall | None = None) -> Observation: ...

    def flush(self, rec: Recorder) -> None: ...

    async def aflush(self, rec: Recorder) -> None: ...

    def drive(
        self,
        steps: CommitProtocol,
        dispatch: Callable[[], AsyncIterator[Observation | Outcome]],
        *,
        blocking: bool = False,
        key: str | None = None,
    ) -> AsyncGenerator[Observation, None]: ...
