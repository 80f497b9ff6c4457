"""Whether the ledger holds an action under the node its arguments named before node identity read
strings in NFC (:meth:`actionspace.pipeline.stages.Stages._written_node`), and under which key.

An action keeps its ledger entry under its node; a batch sent in parts keeps one per part, under
``<node>#<label>`` (:mod:`actionspace.execution.batch`: the item's key per item, ``chunk<n>`` per
chunk), and none under its node: those are looked for, all in one read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.ledger.entries import LedgerStore
from actionspace.validation.items import item_keys, items_of

__all__ = ["stored_as_written"]


def stored_as_written(
    ledger: LedgerStore, run_id: str, spec: ToolSpec, arguments: Mapping[str, Any], written: str
) -> tuple[bool, str | None]:
    """Whether ``ledger`` holds the action of ``arguments`` under node ``written`` of ``run_id``, and
    the key its entry was stored under (None for a batch sent in parts: each part has its own)."""
    nodes = part_nodes(spec, arguments, written)
    if nodes is None:
        entry = ledger.get_node(run_id, written)
        return entry is not None, None if entry is None else entry.key
    return bool(nodes) and bool(ledger.entries_of(run_id, nodes)), None


def part_nodes(spec: ToolSpec, arguments: Mapping[str, Any], node: str) -> list[str] | None:
    """The nodes of the parts a batch call of ``spec`` is sent in, named as the batch runner names
    them; None for a call sent whole."""
    if spec.batch == "per_item":
        labels = item_keys(items_of(spec, arguments) or [])
    elif spec.batch == "chunked":
        count, size = len(items_of(spec, arguments) or []), spec.chunk_size or 1
        labels = [f"chunk{c}" for c in range(-(-count // size))]
    else:
        return None
    return [f"{node}#{label}" for label in labels]
