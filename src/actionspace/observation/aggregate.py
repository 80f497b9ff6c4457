"""Controlled aggregation: answer "how many" / "how much" over a paged tool without reading it all.

:func:`aggregate` (sync) and :func:`aaggregate` walk a paged tool (see ``pagination``) page by
page, each page a normal call through the runtime (validated, authorized, traced), feed every
item to reducers (:class:`Count`, :class:`Sum`, :class:`Distinct`, :class:`TopK`) and return one
small observation. Both bounds are required: the walk stops before another page once
``max_pages`` pages or ``max_items`` items were read (a page is never split, so the items read
may pass ``max_items`` by at most one page). The result is ``complete=True`` only when the last
page was reached and every reducer kept all it saw; otherwise ``complete=False``,
``diagnostics["stopped_by"]`` says why and ``cursor`` is where to resume. A source whose next
cursor is one the walk already asked for is stopped (``"cursor_repeated"``) before any page is
counted twice.

The result observation: ``tool = "aggregate:<tool>"``; ``data`` maps each reducer's name to its
value plus ``pages`` and ``items``; ``total`` is the listing's total when the tool reports one;
``diagnostics["page_calls"]`` lists the call ids of the pages. A failed page ends the walk with
``status="partial"``, that page's error, and the aggregate of the pages before it.
"""

from __future__ import annotations

import heapq
import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from typing import Any, Final, Protocol

from actionspace._canonical import canonical_text
from actionspace.errors import ConfigurationError
from actionspace.observation._artifacts import ArtifactStore
from actionspace.observation.pagination import page_items
from actionspace.policy.principal import Principal
from actionspace.types import Observation, ToolCall

__all__ = ["Count", "Distinct", "PagingRuntime", "Reducer", "Sum", "TopK", "aaggregate", "aggregate"]


class PagingRuntime(Protocol):
    """What an aggregation needs of the runtime that runs its pages (:class:`actionspace.Runtime`)."""

    @property
    def artifacts(self) -> ArtifactStore: ...

    def run_id_of(self, run_id: str | None, *, principal: Principal | None = None) -> str:
        """The id of run ``run_id`` (started under ``principal`` if new), or of the default run."""
        ...

    def call(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
    ) -> Observation: ...

    async def acall(
        self,
        raw: Any,
        *,
        run_id: str | None = None,
        node_id: str | None = None,
        principal: Principal | None = None,
    ) -> Observation: ...

    def record(self, run_id: str, kind: str, data: Mapping[str, Any]) -> None: ...


_MISSING: Final = object()


def _field(item: Any, path: str) -> Any:
    value = item
    for name in path.split("."):
        if not isinstance(value, Mapping) or name not in value:
            return _MISSING
        value = value[name]
    return value


class Reducer(ABC):
    """Folds items into one small value; single use (a fresh one per aggregation)."""

    name: str
    capped: bool = False
    """True when the reducer had to drop something it saw (its value is then incomplete)."""

    @abstractmethod
    def add(self, item: Any) -> None: ...

    @abstractmethod
    def value(self) -> Any: ...


class Count(Reducer):
    """How many items (with ``where``: how many items have a non-null ``where`` field)."""

    def __init__(self, *, where: str | None = None, name: str | None = None) -> None:
        self.where = where
        self.name = name or ("count" if where is None else f"count_{where}")
        self.n = 0

    def add(self, item: Any) -> None:
        if self.where is None or _field(item, self.where) not in (None, _MISSING):
            self.n += 1

    def value(self) -> int:
        return self.n


class Sum(Reducer):
    """The sum of a numeric field (dotted path); items without it are skipped and counted."""

    def __init__(self, field: str, *, name: str | None = None) -> None:
        self.field = field
        self.name = name or f"sum_{field}"
        self.total: int | float = 0
        self.skipped = 0

    def add(self, item: Any) -> None:
        number = _field(item, self.field)
        if isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number):
            self.total += number
        else:
            self.skipped += 1

    def value(self) -> int | float:
        return self.total


class Distinct(Reducer):
    """The distinct values of a field: ``{"count": n, "values": [...]}``, at most ``max_values`` kept.

    Past ``max_values`` distinct values the reducer is ``capped`` (its count is a lower bound).
    """

    def __init__(self, field: str, *, max_values: int = 1000, name: str | None = None) -> None:
        if max_values < 1:
            raise ConfigurationError("Distinct.max_values must be >= 1")
        self.field = field
        self.max_values = max_values
        self.name = name or f"distinct_{field}"
        self.seen: dict[str, Any] = {}

    def add(self, item: Any) -> None:
        value = _field(item, self.field)
        if value is _MISSING:
            return
        key = canonical_text(value)
        if key not in self.seen:
            if len(self.seen) >= self.max_values:
                self.capped = True
                return
            self.seen[key] = value

    def value(self) -> dict[str, Any]:
        return {"count": len(self.seen), "values": [self.seen[k] for k in sorted(self.seen)]}


class TopK(Reducer):
    """The ``k`` items with the largest (or, ``largest=False``, smallest) numeric ``field``.

    Ties keep the earlier item. Memory holds ``k`` items.
    """

    def __init__(self, field: str, k: int, *, largest: bool = True, name: str | None = None) -> None:
        if k < 1:
            raise ConfigurationError("TopK.k must be >= 1")
        self.field, self.k, self.largest = field, k, largest
        self.name = name or f"top{k}_{field}"
        self._heap: list[tuple[float, int, Any]] = []
        self._order = itertools.count()

    def add(self, item: Any) -> None:
        number = _field(item, self.field)
        if not isinstance(number, int | float) or isinstance(number, bool):
            return
        score = float(number) if self.largest else -float(number)
        entry = (score, -next(self._order), item)
        if len(self._heap) < self.k:
            heapq.heappush(self._heap, entry)
        elif entry[:2] > self._heap[0][:2]:
            heapq.heapreplace(self._heap, entry)

    def value(self) -> list[Any]:
        return [item for _, _, item in sorted(self._heap, key=lambda e: e[:2], reverse=True)]


def _reducers(reducer: Reducer | Sequence[Reducer]) -> list[Reducer]:
    reducers = [reducer] if isinstance(reducer, Reducer) else list(reducer)
    names = [r.name for r in reducers]
    if not reducers or len(set(names)) != len(names) or {"pages", "items"} & set(names):
        raise ConfigurationError(f"reducers need distinct names other than pages/items, got {names}")
    return reducers


_Walk = Generator[tuple[ToolCall, str | None], Observation, Observation]


def _walk(
    call: ToolCall,
    reducers: list[Reducer],
    *,
    max_pages: int,
    max_items: int,
    cursor_arg: str,
    node_prefix: str | None,
    run_id: str,
    artifacts: ArtifactStore,
) -> _Walk:
    """Yields (page call, node id) and receives its observation; returns the aggregate."""
    if max_pages < 1 or max_items < 1:
        raise ConfigurationError("aggregate needs max_pages >= 1 and max_items >= 1")
    if not isinstance(call.arguments, Mapping):
        raise ConfigurationError("aggregate needs a call whose arguments are an object")
    cursor = call.arguments.get(cursor_arg)
    asked: set[Any] = set() if cursor is None else {cursor}
    pages = items = 0
    calls: list[str] = []
    total: int | None = None
    stopped_by: str | None = None
    failed: Observation | None = None
    while True:
        if pages >= max_pages or items >= max_items:
            stopped_by = "max_pages" if pages >= max_pages else "max_items"
            break
        arguments = {k: v for k, v in call.arguments.items() if k != cursor_arg}
        if cursor is not None:
            arguments[cursor_arg] = cursor
        node = f"{node_prefix}.p{pages + 1}" if node_prefix is not None else None
        obs = yield ToolCall(name=call.name, arguments=arguments), node
        calls.append(obs.call_id)
        found = page_items(obs, artifacts) if obs.status == "ok" and not obs.provisional else None
        if found is None:
            failed, stopped_by = obs, ("page_failed" if obs.status != "ok" else "page_unreadable")
            break
        pages += 1
        items += len(found)
        for item in found:
            for reducer in reducers:
                reducer.add(item)
        total = obs.total if obs.total is not None else total
        cursor = obs.cursor
        if cursor is None:
            break
        if cursor in asked:  # a loop: the pages from here were read already
            stopped_by = "cursor_repeated"
            break
        asked.add(cursor)
    capped = [r.name for r in reducers if r.capped]
    if stopped_by is None and capped:
        stopped_by = "reducer_capped"
    data: dict[str, Any] = {r.name: r.value() for r in reducers}
    data.update(pages=pages, items=items)
    diagnostics: dict[str, Any] = {"page_calls": calls, "stopped_by": stopped_by}
    if capped:
        diagnostics["capped"] = capped
    return Observation(
        call_id=f"{run_id}:aggregate:{calls[0] if calls else call.name}",
        tool=f"aggregate:{call.name}",
        status="ok" if failed is None else "partial",
        error=failed.error if failed is not None else None,
        data=data,
        complete=stopped_by is None,
        cursor=cursor if stopped_by is not None else None,
        total=total,
        diagnostics=diagnostics,
    )


def _as_call(call: ToolCall | Mapping[str, Any]) -> ToolCall:
    return call if isinstance(call, ToolCall) else ToolCall.from_dict(call)


def _event(result: Observation) -> dict[str, Any]:
    return {
        "tool": result.tool,
        "status": result.status,
        "complete": result.complete,
        "pages": result.data["pages"],
        "items": result.data["items"],
        "stopped_by": result.diagnostics["stopped_by"],
    }


def aggregate(
    rt: PagingRuntime,
    call: ToolCall | Mapping[str, Any],
    *,
    reducer: Reducer | Sequence[Reducer],
    max_pages: int,
    max_items: int,
    run_id: str | None = None,
    principal: Principal | None = None,
    cursor_arg: str = "cursor",
    node_prefix: str | None = None,
) -> Observation:
    """Walk the paged tool ``call`` names through ``rt`` and reduce its items (module docstring).

    ``call``: a ToolCall or ``{"name", "arguments"}``; its ``cursor_arg`` argument (default
    ``cursor``), when given, is where the walk starts. ``node_prefix``: page nodes are named
    ``<prefix>.p1``, ``<prefix>.p2``… (default: the run's next node numbers). Records an
    ``aggregated`` trace event. Raises ``ConfigurationError`` for bad bounds or reducers.
    """
    run = rt.run_id_of(run_id, principal=principal)
    walk = _walk(
        _as_call(call),
        _reducers(reducer),
        max_pages=max_pages,
        max_items=max_items,
        cursor_arg=cursor_arg,
        node_prefix=node_prefix,
        run_id=run,
        artifacts=rt.artifacts,
    )
    try:
        page_call, node = next(walk)
        while True:
            obs = rt.call(page_call, run_id=run, node_id=node, principal=principal)
            page_call, node = walk.send(obs)
    except StopIteration as stop:
        result: Observation = stop.value
    rt.record(run, "aggregated", _event(result))
    return result


async def aaggregate(
    rt: PagingRuntime,
    call: ToolCall | Mapping[str, Any],
    *,
    reducer: Reducer | Sequence[Reducer],
    max_pages: int,
    max_items: int,
    run_id: str | None = None,
    principal: Principal | None = None,
    cursor_arg: str = "cursor",
    node_prefix: str | None = None,
) -> Observation:
    """Async :func:`aggregate`."""
    run = rt.run_id_of(run_id, principal=principal)
    walk = _walk(
        _as_call(call),
        _reducers(reducer),
        max_pages=max_pages,
        max_items=max_items,
        cursor_arg=cursor_arg,
        node_prefix=node_prefix,
        run_id=run,
        artifacts=rt.artifacts,
    )
    try:
        page_call, node = next(walk)
        while True:
            obs = await rt.acall(page_call, run_id=run, node_id=node, principal=principal)
            page_call, node = walk.send(obs)
    except StopIteration as stop:
        result: Observation = stop.value
    rt.record(run, "aggregated", _event(result))
    return result
