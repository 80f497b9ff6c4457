"""Fixing the tools a run may call (``Runtime.offer``): select, pin, record, render definitions."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.candidates import request_of
from actionspace.discovery.config import Discovery, errors_in_trace
from actionspace.discovery.disclosure import (
    DESCRIBE_TOOL,
    describe_event,
    describe_tool,
    described_spec,
    full_definition,
    short_definition,
)
from actionspace.discovery.runs import RunState, pin_of
from actionspace.errors import DuplicateToolError
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceStore

__all__ = ["Offers", "describer", "offer"]

Record = Callable[[str, str, Mapping[str, Any]], None]


def describer(catalog: Catalog, runs: Callable[[str], RunState | None], record: Any) -> ToolSpec:
    """``describe_tool``, registered at the first disclosure offer (other runtimes never see it)."""
    found = catalog.current(DESCRIBE_TOOL)
    if found is not None:
        return found
    try:
        return catalog.register(describe_tool(catalog.find, runs, record))
    except DuplicateToolError:  # another thread registered it first
        return catalog.get(DESCRIBE_TOOL)


def offer(
    *,
    catalog: Catalog,
    discovery: Discovery,
    run: RunState,
    principal: Principal,
    seen_errors: set[str],
    names: Iterable[str] | None,
    query: str | None,
    limit: int | None,
    phase: str | None,
    capabilities: Iterable[str] | None,
    disclosure: bool | None,
    describe: Callable[[], ToolSpec],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the definitions the model gets, the ``candidates_offered`` event); pins the run's tools."""
    config = discovery.config
    disclose = config.disclosure if disclosure is None else disclosure
    caps = None if capabilities is None else frozenset(capabilities)  # read twice below
    if limit is None and query:
        limit = config.limit
    request = request_of(
        principal, query=query, limit=limit, phase=phase, capabilities=caps, errors=seen_errors, names=names
    )
    selection = discovery.index(catalog).select(request)
    offered = list(selection.offered)
    described = describe() if disclose and config.describe_tool else None
    if described is not None:
        offered.append(described)
    before = run.pins
    run.offered({s.name: pin_of(s) for s in offered}, disclosure=disclose)  # the same again: no change
    run.resolved.clear()
    # A definition read earlier stays read only while the same version is offered.
    run.described = {n for n in run.described if n in run.pins and before.get(n) == run.pins[n]}
    if described is not None:
        run.described.add(DESCRIBE_TOOL)
    event = selection.event(run.catalogs)
    if selection.catalog is not None:
        run.catalogs.add(selection.catalog)
    if described is not None:
        event["offered"].append({"name": described.name, "version": described.version})
    event.update(
        principal=principal.id,
        query=None if query is None else query[:500],
        limit=limit,
        phase=phase,
        capabilities=None if caps is None else sorted(caps),
        errors_seen=sorted(seen_errors),
        disclosure=disclose,
    )
    if disclose:  # the describe tool itself comes whole: the model needs its schema to use it
        return [s.describe() if s is described else short_definition(s) for s in offered], event
    return [s.describe() for s in offered], event


class Offers:
    """A runtime's offers and descriptions of its tools to its runs, each recorded in the run's trace."""

    __slots__ = ("catalog", "known_run", "open_run", "record", "trace")

    def __init__(
        self,
        catalog: Catalog,
        trace: TraceStore,
        *,
        open_run: Callable[[str], RunState],
        known_run: Callable[[str], RunState | None],
        record: Record,
    ) -> None:
        self.catalog = catalog
        self.trace = trace
        self.open_run = open_run
        self.known_run = known_run
        self.record = record

    def offer(
        self,
        discovery: Discovery,
        run: RunState,
        principal: Principal | None,
        errors: Iterable[str],
        *,
        names: Iterable[str] | None,
        query: str | None,
        limit: int | None,
        phase: str | None,
        capabilities: Iterable[str] | None,
        disclosure: bool | None,
    ) -> list[dict[str, Any]]:
        """:func:`offer` to ``run`` for ``principal`` (None: the run's), recorded as ``candidates_offered``.

        Recovery tools are unlocked by the errors observed in the run's trace and those in ``errors``.
        """
        definitions, event = offer(
            catalog=self.catalog,
            discovery=discovery,
            run=run,
            principal=principal or run.principal,
            seen_errors=self._errors_seen(run) | set(errors),
            names=names,
            query=query,
            limit=limit,
            phase=phase,
            capabilities=capabilities,
            disclosure=disclosure,
            describe=lambda: describer(self.catalog, self.known_run, self.record),
        )
        self.record(run.run_id, "candidates_offered", event)
        return definitions

    def _errors_seen(self, run: RunState) -> set[str]:
        """The error categories observed in ``run`` (a copy): read from its trace the first time
        (events another process stored included), then kept by the engine as it stores events
        (``RunRegistry.flush``), so an offer does not read the whole trace again each turn."""
        seen = run.errors_seen
        if seen is None:
            # set first: a batch stored while the trace is read adds to it (and is in the trace too)
            seen = run.errors_seen = set()
            seen |= errors_in_trace(self.trace.events(run.run_id))
            run.errors_mark += 1  # saved with the run from now on
        return set(seen)

    def describe(self, name: str, run_id: str | None) -> dict[str, Any]:
        """The current version's ``describe()``; with ``run_id`` the full definition offered there, recorded.

        Raises UnknownToolError for a tool not registered (or, with ``run_id``, not offered to the run).
        """
        if run_id is None:
            return self.catalog.get(name).describe()
        spec = described_spec(self.catalog.find, self.open_run(run_id), name)
        self.record(run_id, "described", describe_event(spec, via="host"))
        return full_definition(spec)
