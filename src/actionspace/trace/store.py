"""Open a trace store from a URL, and find the default one.

Supported URLs:

* ``memory://`` — in this process only; lost when it exits.
* ``sqlite:///relative/path.db`` (from the working directory) or ``sqlite:////abs/path.db``
  (absolute), SQLAlchemy's convention; ``~`` is expanded and missing parent directories are created.
* ``postgresql://user@host/db`` (or ``postgres://…``) — a PostgreSQL database shared by many
  processes and hosts; the tables are created if missing (``create`` does not apply).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from actionspace._extras import require
from actionspace._store_url import sqlite_path, sqlite_url
from actionspace.errors import ConfigurationError, StoreNotFoundError
from actionspace.trace.events import FindsRunIds, RunSummary, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceReader, SqliteTraceStore

__all__ = [
    "SUPPORTED_URLS",
    "ListsTenantRuns",
    "StoreNotFoundError",
    "default_store_url",
    "open_trace_store",
    "resolve_run_id",
    "sqlite_path",
]

SUPPORTED_URLS: Final = (
    "memory://",
    "sqlite:///relative/path.db",
    "sqlite:////absolute/path.db",
    "postgresql://user@host/db",
)
_MAX_AMBIGUOUS_SHOWN: Final = 5


@runtime_checkable
class ListsTenantRuns(Protocol):
    """A trace store that lists one tenant's runs in its query (the SQLite, PostgreSQL and memory
    stores do): a tenant's page is found however many runs other tenants have, at the cost of a page.

    A run's tenant is that of its first ``run_started`` event (by ``seq``): its ``tenant``, None
    for a run started without one (or with no ``run_started``), as ``service.scoping`` reads it.
    """

    def tenant_runs(
        self, tenant: str | None, *, limit: int = 50, after: tuple[float, str] | None = None
    ) -> list[RunSummary]:
        """At most ``limit`` runs of ``tenant``, the most recently active first, ties by run id;
        with ``after``, only those listed after the row ``(last_at, run_id)`` (as ``PagesRuns``)."""
        ...


def open_trace_store(url: str, *, create: bool = True, read_only: bool = False) -> TraceStore:
    """The trace store ``url`` names (see the module docstring for the forms).

    With ``create=False`` a missing SQLite file raises :class:`StoreNotFoundError` instead of being
    created. With ``read_only=True`` (for commands that only read; implies ``create=False``) the
    store is opened so that reading writes nothing: no file, table or journal made, every query
    read-only; a store holding no trace raises StoreNotFoundError (``no trace in …``), and appends
    raise ConfigurationError. Raises :class:`~actionspace.errors.ConfigurationError` for an
    unsupported or malformed URL.
    """
    scheme, sep, _ = url.partition("://")
    if not sep:
        raise _unsupported(url)
    scheme = scheme.lower()
    if scheme == "memory":
        if url[len("memory://") :]:
            raise ConfigurationError(f"memory:// takes no path, got {url!r}")
        return MemoryTraceStore()
    if scheme == "sqlite":
        path = sqlite_path(url)
        if read_only:
            return SqliteTraceReader(path)  # refuses a missing file as below
        if not path.exists():
            if not create:
                raise StoreNotFoundError(f"no trace store at {path} (nothing has been recorded there yet)")
            path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteTraceStore(path)
    if scheme in ("postgresql", "postgres"):
        # Imported here so that psycopg is loaded only by processes that use PostgreSQL.
        postgres = require("actionspace.trace.postgres", "postgres", "a postgresql:// store")
        opened = postgres.PostgresTraceReader if read_only else postgres.PostgresTraceStore
        store: TraceStore = opened(url)
        return store
    raise _unsupported(url)


def default_store_url(environ: Mapping[str, str] | None = None) -> str:
    """``$ACTIONSPACE_STORE`` if set, else ``sqlite:////…`` naming ``$ACTIONSPACE_HOME/actionspace.db``.

    ``ACTIONSPACE_HOME`` defaults to ``~/.actionspace``. ``environ`` defaults to ``os.environ``.
    """
    env = os.environ if environ is None else environ
    if url := env.get("ACTIONSPACE_STORE", "").strip():
        return url
    home = Path(env.get("ACTIONSPACE_HOME", "").strip() or "~/.actionspace").expanduser()
    return sqlite_url(home.absolute() / "actionspace.db")


def resolve_run_id(store: TraceStore, prefix: str) -> str:
    """The one stored run id that starts with ``prefix`` (an exact id always wins).

    Raises ``LookupError`` when no run or more than one run matches; the message says which.
    """
    if not prefix:
        raise LookupError("give a run id or a prefix of one")
    if isinstance(store, FindsRunIds):
        found = store.run_ids(prefix, limit=_MAX_AMBIGUOUS_SHOWN + 1)
    else:
        found = sorted(s.run_id for s in store.runs(limit=10_000) if s.run_id.startswith(prefix))
    if prefix in found:
        return prefix
    if not found:
        raise LookupError(f"no run matches {prefix!r}")
    if len(found) > 1:
        shown = ", ".join(found[:_MAX_AMBIGUOUS_SHOWN])
        more = ", …" if len(found) > _MAX_AMBIGUOUS_SHOWN else ""
        raise LookupError(f"{prefix!r} matches several runs ({shown}{more}); give more of the id")
    return found[0]


def _unsupported(url: str) -> ConfigurationError:
    return ConfigurationError(f"unsupported trace store URL {url!r}; supported: {', '.join(SUPPORTED_URLS)}")
