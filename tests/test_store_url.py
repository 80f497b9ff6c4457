"""Store URLs follow SQLAlchemy's convention: three slashes then a relative path, four for an absolute one."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace._store_url import sqlite_path, sqlite_url
from actionspace.errors import ConfigurationError
from actionspace.trace.store import default_store_url


def test_three_slashes_name_a_file_relative_to_the_working_directory() -> None:
    assert sqlite_path("sqlite:///actionspace.db") == Path("actionspace.db")
    assert sqlite_path("sqlite:///data/trace.db") == Path("data/trace.db")


def test_four_slashes_name_an_absolute_file() -> None:
    assert sqlite_path("sqlite:////var/lib/as.db") == Path("/var/lib/as.db")


def test_a_home_relative_path_is_expanded() -> None:
    assert sqlite_path("sqlite:///~/as.db") == Path("~/as.db").expanduser()


def test_two_slashes_name_a_host_and_are_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"sqlite:///gw\.db"):
        sqlite_path("sqlite://gw.db")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:////", "sqlite:///dir/"])
def test_a_url_naming_no_file_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="names no database file"):
        sqlite_path(url)


def test_sqlite_url_round_trips_absolute_and_relative_paths(tmp_path: Path) -> None:
    assert sqlite_url(tmp_path / "a.db") == "sqlite:///" + str(tmp_path / "a.db")  # four slashes
    assert sqlite_path(sqlite_url(tmp_path / "a.db")) == tmp_path / "a.db"
    assert sqlite_url(Path("rel/a.db")) == "sqlite:///rel/a.db"


def test_the_readme_url_writes_into_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    rt = Runtime("sqlite:///actionspace.db")
    rt.close()
    assert (tmp_path / "actionspace.db").exists()


def test_a_runtime_without_a_store_keeps_everything_in_memory() -> None:
    rt = Runtime()
    assert rt.store_url == "memory://"
    rt.close()


def test_the_cli_default_store_is_an_absolute_file_under_the_data_directory(tmp_path: Path) -> None:
    url = default_store_url({"ACTIONSPACE_HOME": str(tmp_path)})
    assert url == "sqlite:///" + str(tmp_path / "actionspace.db")
    assert sqlite_path(url) == tmp_path / "actionspace.db"
