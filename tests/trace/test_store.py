"""Opening stores from URLs, the default URL, and run id prefixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace.errors import ConfigurationError
from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store import (
    StoreNotFoundError,
    default_store_url,
    open_trace_store,
    resolve_run_id,
)


def test_memory_url_opens_a_fresh_memory_store() -> None:
    assert isinstance(open_trace_store("memory://"), MemoryTraceStore)


def test_absolute_sqlite_url_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "trace.db"
    store = open_trace_store(f"sqlite:///{path}")
    assert isinstance(store, SqliteTraceStore)
    assert store.path == path
    assert path.exists()
    store.close()


def test_relative_sqlite_url_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store = open_trace_store("sqlite:///data/trace.db")
    store.close()
    assert (tmp_path / "data" / "trace.db").exists()


def test_a_missing_file_is_not_created_when_create_is_false(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="no trace store"):
        open_trace_store(f"sqlite:///{tmp_path}/missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()


def test_a_postgresql_url_that_reaches_no_server_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot connect to PostgreSQL"):
        open_trace_store(f"postgresql://postgres@/actionspace?host={tmp_path}")


@pytest.mark.parametrize("url", ["mysql://db", "/tmp/trace.db", "trace.db", "sqlite:trace.db"])
def test_unknown_urls_are_refused_with_the_supported_forms(url: str) -> None:
    with pytest.raises(ConfigurationError, match=r"supported: memory://, sqlite:///"):
        open_trace_store(url)


@pytest.mark.parametrize(
    "url", ["sqlite://", "sqlite:///", "sqlite:///tmp/", "sqlite://:memory:", "memory://x"]
)
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        open_trace_store(url)


def test_the_default_url_comes_from_actionspace_store_first() -> None:
    env = {"ACTIONSPACE_STORE": "memory://", "ACTIONSPACE_HOME": "/srv/as"}
    assert default_store_url(env) == "memory://"


def test_the_default_url_lives_under_actionspace_home() -> None:
    assert default_store_url({"ACTIONSPACE_HOME": "/srv/as"}) == "sqlite:////srv/as/actionspace.db"


def test_without_settings_the_default_url_lives_under_the_home_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ACTIONSPACE_STORE", raising=False)
    monkeypatch.delenv("ACTIONSPACE_HOME", raising=False)
    assert default_store_url() == f"sqlite:///{tmp_path}/.actionspace/actionspace.db"


def _store_with(*run_ids: str) -> MemoryTraceStore:
    store = MemoryTraceStore()
    for rid in run_ids:
        store.append_many([TraceEvent(run_id=rid, seq=0, kind="run_started", ts=1.0)])
    return store


def test_a_unique_prefix_resolves_to_its_run() -> None:
    assert resolve_run_id(_store_with("run-7f3a", "run-81bc"), "run-7") == "run-7f3a"


def test_an_exact_id_wins_over_longer_ids_it_prefixes() -> None:
    assert resolve_run_id(_store_with("run-1", "run-10"), "run-1") == "run-1"


def test_an_ambiguous_prefix_names_the_candidates() -> None:
    with pytest.raises(LookupError, match="run-1, run-2"):
        resolve_run_id(_store_with("run-1", "run-2"), "run")


def test_a_prefix_matching_nothing_says_so() -> None:
    with pytest.raises(LookupError, match="no run matches 'zzz'"):
        resolve_run_id(_store_with("run-1"), "zzz")
