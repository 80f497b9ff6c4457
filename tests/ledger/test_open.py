"""Opening the ledger and approval stores from a store URL."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from actionspace.errors import ConfigurationError
from actionspace.ledger.memory import MemoryApprovalStore, MemoryLedgerStore
from actionspace.ledger.open import open_approvals, open_ledger
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from tests.ledger.factories import entry


def test_memory_urls_open_new_memory_stores() -> None:
    first, second = open_ledger("memory://"), open_ledger("memory://")
    assert isinstance(first, MemoryLedgerStore) and first is not second
    first.begin(entry())
    assert second.get(entry().key) is None
    assert isinstance(open_approvals("memory://"), MemoryApprovalStore)


def test_a_sqlite_url_opens_one_file_for_both_and_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "actionspace.db"
    url = f"sqlite:///{path.as_posix()}"
    ledger, approvals = open_ledger(url), open_approvals(url)
    try:
        assert isinstance(ledger, SqliteLedgerStore) and isinstance(approvals, SqliteApprovalStore)
        assert ledger.path == path and approvals.path == path
        ledger.begin(entry())
    finally:
        ledger.close()
        approvals.close()
    with SqliteLedgerStore(path) as reopened:
        assert reopened.get(entry().key) == entry()


@pytest.mark.parametrize("url", ["memory://x", "sqlite://", "sqlite:///", "mysql://db", "ledger.db"])
def test_a_malformed_or_unsupported_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_ledger(url)
    with pytest.raises(ConfigurationError):
        open_approvals(url)


def test_a_postgres_url_without_the_postgres_module_names_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "actionspace.ledger.postgres", None)
    with pytest.raises(ConfigurationError, match=r"actionspace\.ledger\.postgres"):
        open_ledger("postgresql://u@localhost/db")
    with pytest.raises(ConfigurationError, match=r"actionspace\.ledger\.postgres"):
        open_approvals("postgres://u@localhost/db")


def test_a_postgres_url_opens_the_postgres_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[tuple[str, str]] = []
    fake = ModuleType("actionspace.ledger.postgres")

    def ledger_store(url: str) -> MemoryLedgerStore:
        opened.append(("ledger", url))
        return MemoryLedgerStore()

    def approval_store(url: str) -> MemoryApprovalStore:
        opened.append(("approvals", url))
        return MemoryApprovalStore()

    fake.PostgresLedgerStore = ledger_store  # type: ignore[attr-defined]
    fake.PostgresApprovalStore = approval_store  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "actionspace.ledger.postgres", fake)
    open_ledger("postgresql://u@h/db")
    open_approvals("postgresql://u@h/db")
    assert opened == [("ledger", "postgresql://u@h/db"), ("approvals", "postgresql://u@h/db")]
