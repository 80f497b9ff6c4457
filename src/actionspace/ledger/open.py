"""Open the ledger and approval stores a store URL names (the same URL as the trace store).

* ``memory://`` — a new store in this process only; lost when it exits.
* ``sqlite:///relative/path.db`` or ``sqlite:////abs/path.db`` (SQLAlchemy's convention) — the file
  shared with the trace store; ``~`` is expanded and missing parent directories are created.
* ``postgresql://…`` (or ``postgres://…``) — :mod:`actionspace.ledger.postgres`, imported only then.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Final, cast

from actionspace._extras import require
from actionspace._store_url import sqlite_path
from actionspace.approval.requests import ApprovalStore
from actionspace.errors import ConfigurationError
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.memory import MemoryApprovalStore, MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore

__all__ = ["SUPPORTED_URLS", "open_approvals", "open_ledger", "scheme_of", "sqlite_file"]

SUPPORTED_URLS: Final = (
    "memory://",
    "sqlite:///relative.db",
    "sqlite:////abs/path.db",
    "postgresql://user@host/db",
)
_POSTGRES_MODULE: Final = "actionspace.ledger.postgres"


def open_ledger(url: str) -> LedgerStore:
    """The ledger store ``url`` names; raises ConfigurationError for an unsupported or malformed URL."""
    scheme = _scheme(url)
    if scheme == "memory":
        return MemoryLedgerStore()
    if scheme == "sqlite":
        return SqliteLedgerStore(_sqlite_file(url))
    return cast(LedgerStore, _postgres().PostgresLedgerStore(url))


def open_approvals(url: str) -> ApprovalStore:
    """The approval store ``url`` names; raises ConfigurationError for an unsupported or malformed URL."""
    scheme = _scheme(url)
    if scheme == "memory":
        return MemoryApprovalStore()
    if scheme == "sqlite":
        return SqliteApprovalStore(_sqlite_file(url))
    return cast(ApprovalStore, _postgres().PostgresApprovalStore(url))


def scheme_of(url: str) -> str:
    """``memory``, ``sqlite`` or ``postgresql`` for a supported store URL; ConfigurationError otherwise."""
    return _scheme(url)


def sqlite_file(url: str) -> Path:
    """The file a ``sqlite://`` URL names, its parent directories created."""
    return _sqlite_file(url)


def _scheme(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("memory", "sqlite", "postgresql", "postgres"):
        raise ConfigurationError(
            f"unsupported store URL {url!r}; expected one of {', '.join(SUPPORTED_URLS)}"
        )
    if scheme == "memory" and rest:
        raise ConfigurationError(f"memory:// takes no path, got {url!r}")
    return "postgresql" if scheme == "postgres" else scheme


def _sqlite_file(url: str) -> Path:
    path = sqlite_path(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _postgres() -> ModuleType:
    return require(_POSTGRES_MODULE, "postgres", "a postgresql:// store")
