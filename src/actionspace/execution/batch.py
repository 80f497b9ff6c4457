"""Batch tools with partial failure: one call carrying a list of items (DESIGN §5, §7).

A tool declares ``batch=`` on its ToolSpec; its items sit in the ``items_arg`` argument and are
named by their keys (:mod:`actionspace.execution.items`). The runtime splits a batch call into
*units*, each a sub-call of the node that goes through the ledger on its own:

* ``per_item``: one unit per item. The function receives the call's arguments with the items list
  replaced by ``[item]``. Its node id is ``<node>#<item key>``, so its idempotency key is minted
  from (run, that node id, tool, the arguments with that one item).
* ``all_or_nothing``: one unit with every item, under the node's own key; the tool keeps its own
  transaction. On success the item observations come from the result when it is a list (one entry
  per item, in order) or a mapping keyed by item key; otherwise there are none, only the whole.
  On failure every item is failed: none is marked done.
* ``chunked``: units of ``chunk_size`` consecutive items, each an ``all_or_nothing`` sub-call with
  node id ``<node>#chunk<i>``; failures are partial across chunks.

The observation holds one item observation per item in ``items``, in the order the items were
given (never completion order), each with ``call_id`` ``<call_id>#<item key>``. Its status is
``ok`` when every item succeeded, ``partial`` when some failed and ``error`` when all did;
``diagnostics["failed_items"]`` lists exactly the failed items as ``{"key", "category"}``.

Calling the same node again (same run, node id and arguments) replays the units the ledger holds
as committed (``diagnostics["replayed"]``) and sends only the others. A unit that failed did not
commit, so it is sent again: with the same key when the failure was retryable (the ledger sends
those again itself), else under the next attempt's node id ``<unit node>~<n>``, at most
:data:`MAX_UNIT_ATTEMPTS` times over all calls of the node.

Units run concurrently on the async path (at most :data:`MAX_CONCURRENT_UNITS` at once) and one
after another on the sync path. A bug while running one unit fails that unit as ``internal``; the
outcomes of the others are kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from actionspace.errors import RETRYABLE, ActionError, said_safely
from actionspace.execution.items import count_items, item_keys, items_of
from actionspace.execution.ready import CallEvents, Ready
from actionspace.ledger.entries import LedgerEntry, LedgerStore
from actionspace.ledger.keys import idempotency_key
from actionspace.types import Effect, Observation, ObservationStatus, Provenance

__all__ = ["MAX_CONCURRENT_UNITS", "MAX_UNIT_ATTEMPTS", "arun_batch", "count_items", "run_batch"]

MAX_CONCURRENT_UNITS: Final = 8
"""Most sub-calls of one batch call running at once on the async path."""
MAX_UNIT_ATTEMPTS: Final = 16
"""Most sends of one unit over every call of its node; after that its last failure is replayed."""

RunOne = Callable[[Ready], Observation]
"""Runs one sub-call through the single-call path (ledger, executor, observe)."""
ARunOne = Callable[[Ready], Awaitable[Observation]]


@dataclass(frozen=True, slots=True)
class _Unit:
    """One sub-call: the items it carries, by position; ``label`` None means the whole call."""

    label: str | None
    indexes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _Batch:
    ready: Ready
    items: list[Any]
    keys: list[str]
    units: list[_Unit]


def _split(ready: Ready) -> _Batch:
    spec = ready.compiled.spec
    items = items_of(spec, ready.arguments) or []
    keys = item_keys(items)
    if spec.batch == "per_item":
        units = [_Unit(key, (i,)) for i, key in enumerate(keys)]
    elif spec.batch == "chunked":
        size = spec.chunk_size or 1
        units = [
            _Unit(f"chunk{c}", tuple(range(start, min(start + size, len(items)))))
            for c, start in enumerate(range(0, len(items), size))
        ]
    else:
        units = [_Unit(None, tuple(range(len(items))))]
    return _Batch(ready, items, keys, units)


def _sub_ready(batch: _Batch, unit: _Unit, run_id: str, attempt: int) -> Ready:
    ready = batch.ready
    spec = ready.compiled.spec
    node, call_id = ready.node_id, ready.call_id
    arguments, kwargs = ready.arguments, ready.kwargs
    if unit.label is not None:
        node, call_id = f"{node}#{unit.label}", f"{call_id}#{unit.label}"
        name = spec.items_arg
        converted = kwargs.get(name)
        if not isinstance(converted, list) or len(converted) != len(batch.items):
            converted = batch.items
        arguments = {**arguments, name: [batch.items[i] for i in unit.indexes]}
        kwargs = {**kwargs, name: [converted[i] for i in unit.indexes]}
    if attempt > 1:
        node = f"{node}~{attempt}"
    key = idempotency_key(run_id, node, spec.key, arguments) if spec.has_side_effects else None
    if key is not None and spec.takes_key:
        kwargs = {**kwargs, "idempotency_key": key}
    return Ready(
        ready.compiled, call_id, node, arguments, kwargs, key, exempt=ready.exempt, label=ready.label
    )


def _pick(batch: _Batch, unit: _Unit, run_id: str, ledger: LedgerStore) -> Ready:
    """The sub-call to run for ``unit``: the first attempt whose ledger entry has not failed."""
    attempt = 1
    while True:
        sub = _sub_ready(batch, unit, run_id, attempt)
        if sub.key is None or attempt >= MAX_UNIT_ATTEMPTS:
            return sub
        entry = ledger.get(sub.key)
        if entry is None or entry.state != "failed" or _resent_by_ledger(entry):
            return sub
        attempt += 1


def _resent_by_ledger(entry: LedgerEntry) -> bool:
    return entry.error is not None and entry.error.get("category") in RETRYABLE


def run_batch(ready: Ready, rec: CallEvents, ledger: LedgerStore, run_one: RunOne) -> Observation:
    """Run a batch call's units one after another; the grouped observation (see module docstring)."""
    batch = _split(ready)
    results = []
    for unit in batch.units:
        try:
            results.append(run_one(_pick(batch, unit, rec.run_id, ledger)))
        except Exception as exc:  # a bug in one unit must not hide the committed outcomes of the others
            results.append(_internal(batch, unit, exc, rec))
    return _assemble(batch, results, rec)


async def arun_batch(ready: Ready, rec: CallEvents, ledger: LedgerStore, run_one: ARunOne) -> Observation:
    """Run a batch call's units concurrently (bounded); the grouped observation."""
    batch = _split(ready)
    gate = asyncio.Semaphore(MAX_CONCURRENT_UNITS)

    async def one(unit: _Unit) -> Observation:
        async with gate:
            try:
                return await run_one(_pick(batch, unit, rec.run_id, ledger))
            except Exception as exc:
                return _internal(batch, unit, exc, rec)

    results = await asyncio.gather(*(one(unit) for unit in batch.units))
    return _assemble(batch, list(results), rec)


def _internal(batch: _Batch, unit: _Unit, exc: Exception, rec: CallEvents) -> Observation:
    spec = batch.ready.compiled.spec
    error = ActionError.of(
        "internal",
        "actionspace failed while running this part of the batch: "
        f"{type(exc).__name__}: {said_safely(exc, 300)}",
        vendor_code=type(exc).__name__,
    )
    rec.add("observation", {"status": "error", "category": "internal", "message": error.message})
    suffix = "" if unit.label is None else f"#{unit.label}"
    failed = Observation.failure(
        error, call_id=f"{batch.ready.call_id}{suffix}", tool=spec.name, tool_version=spec.version
    )
    own = _provenance(batch.ready)
    quoted = dataclasses.replace(failed.provenance, trust=own.trust, labels=own.labels)
    return dataclasses.replace(failed, provenance=quoted)


def _provenance(ready: Ready) -> Provenance:
    """The batch's own provenance: the call's output label (its tool's joined with every argument's,
    so with every item's), or the tool's label where no flow check labelled the call."""
    label = ready.label
    if label is None:
        spec = ready.compiled.spec
        return Provenance(
            fetched_at=time.time(), trust=spec.labels.integrity, labels=ready.compiled.output_labels
        )
    return Provenance(fetched_at=time.time(), trust=label.integrity, labels=label.tags())


# ---------------------------------------------------------------------- grouping


def _with(obs: Observation, **changes: Any) -> Observation:
    fields = {f.name: getattr(obs, f.name) for f in dataclasses.fields(obs)}
    return Observation(**{**fields, **changes})


def _per_item_data(data: Any, keys: Sequence[str]) -> list[Any] | None:
    """The result split per item: a list aligned with the items, or a mapping keyed by item key."""
    if isinstance(data, list) and len(data) == len(keys):
        return data
    if isinstance(data, Mapping) and len(data) == len(keys) and set(data) == set(keys):
        return [data[k] for k in keys]
    return None


def _unit_items(batch: _Batch, unit: _Unit, obs: Observation) -> list[Observation]:
    """One observation per item of ``unit``, from the unit's observation."""
    ready = batch.ready
    spec = ready.compiled.spec
    keys = [batch.keys[i] for i in unit.indexes]
    if spec.batch == "per_item":
        return [_with(obs, call_id=f"{ready.call_id}#{keys[0]}")]
    notes: dict[str, Any] = {} if unit.label is None else {"chunk": unit.label}
    if obs.diagnostics.get("replayed"):
        notes["replayed"] = True
    if obs.status == "error":
        return [
            Observation(
                call_id=f"{ready.call_id}#{key}",
                tool=spec.name,
                tool_version=spec.version,
                status="error",
                error=obs.error,
                diagnostics=notes,
                provenance=obs.provenance,
            )
            for key in keys
        ]
    data = _per_item_data(obs.data, keys)
    return [
        Observation(
            call_id=f"{ready.call_id}#{key}",
            tool=spec.name,
            tool_version=spec.version,
            data=None if data is None else data[n],
            complete=obs.complete,
            diagnostics=notes,
            provenance=obs.provenance,
        )
        for n, key in enumerate(keys)
    ]


def _failed(keys: Sequence[str], items: Sequence[Observation]) -> list[dict[str, str]]:
    return [
        {"key": key, "category": obs.error.category if obs.error is not None else "internal"}
        for key, obs in zip(keys, items, strict=True)
        if obs.status == "error"
    ]


def _assemble(batch: _Batch, results: list[Observation], rec: CallEvents) -> Observation:
    ready = batch.ready
    spec = ready.compiled.spec
    items: list[Observation] = []
    for unit, obs in zip(batch.units, results, strict=True):
        items.extend(_unit_items(batch, unit, obs))
    failed = _failed(batch.keys, items)
    if spec.batch == "all_or_nothing":
        whole = results[0]
        if whole.status == "ok" and _per_item_data(whole.data, batch.keys) is None:
            items = []  # the result is not split per item: the whole observation is the answer
        diagnostics = {**whole.diagnostics, "batch": spec.batch, "failed_items": failed}
        return _with(whole, items=tuple(items), diagnostics=diagnostics)
    status: ObservationStatus = "ok"
    error = None
    if failed:
        status = "error" if len(failed) == len(items) else "partial"
    if status == "error":
        first = next(o for o in items if o.error is not None)
        assert first.error is not None
        message = f"all {len(items)} items failed; first, {failed[0]['key']}: {first.error.message}"
        error = dataclasses.replace(first.error, message=message[:2000])
    effects: tuple[Effect, ...] = tuple(e for obs in results for e in obs.effects)
    rec.add(
        "observation",
        {
            "status": status,
            "tool": spec.name,
            "version": spec.version,
            "batch": spec.batch,
            "items": len(items),
            "failed_items": failed,
        },
    )
    return Observation(
        call_id=ready.call_id,
        tool=spec.name,
        tool_version=spec.version,
        status=status,
        data=[obs.data for obs in results] if spec.batch == "chunked" else None,
        effects=effects,
        error=error,
        diagnostics={"batch": spec.batch, "failed_items": failed},
        complete=all(obs.complete for obs in results),
        provenance=_provenance(ready),
        items=tuple(items),
    )
