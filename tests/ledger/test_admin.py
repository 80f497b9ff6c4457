"""A runtime's ledger administration asks anew, at each recovery, where the entries' tools are found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actionspace.catalog.registry import Catalog
from actionspace.ledger.admin import LedgerAdmin
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.recover import unshaped
from actionspace.types import ManualClock


def _ignore(run_id: str, kind: str, data: Mapping[str, Any]) -> None:
    return None


def test_each_recovery_asks_anew_where_the_tools_are_found() -> None:
    asked: list[int] = []

    def specs() -> Catalog:
        asked.append(1)
        return Catalog()

    admin = LedgerAdmin(MemoryLedgerStore(), specs=specs, record=_ignore, shape=unshaped, clock=ManualClock())
    assert admin.recover().to_dict() == admin.recover().to_dict()
    assert len(asked) == 2
