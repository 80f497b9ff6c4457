"""A store URL a new user gets wrong — a file of another program, a folder, a path through a file —
is one ConfigurationError from ``Runtime(...)`` and one line from every command that reads a store,
naming the path and what to give instead; never a driver's exception, and the file left as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace.cli import _mount, app
from actionspace.errors import ConfigurationError

NOTES = b"these are my notes, not a database\n" * 50


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.db"
    path.write_bytes(NOTES)
    return path


def _refusal(url: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        Runtime(url).close()
    said = str(caught.value)
    assert "\n" not in said and url in said
    return said


def test_a_runtime_on_a_file_that_is_not_sqlite_is_a_configuration_error(notes: Path) -> None:
    said = _refusal(f"sqlite:///{notes}")
    assert "not an SQLite database" in said and "name another file" in said
    assert notes.read_bytes() == NOTES


def test_a_runtime_on_a_folder_is_a_configuration_error_naming_a_file_to_use(tmp_path: Path) -> None:
    said = _refusal(f"sqlite:///{tmp_path}")
    assert "is a folder" in said and f"sqlite:///{tmp_path}/actionspace.db" in said


def test_a_runtime_on_a_path_through_a_file_is_a_configuration_error(notes: Path) -> None:
    said = _refusal(f"sqlite:///{notes}/as.db")
    assert f"{notes} is not a folder" in said
    assert notes.read_bytes() == NOTES


def test_a_runtime_on_a_good_path_still_opens_and_keeps_what_it_recorded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/new/as.db"
    with Runtime(url) as rt:
        run = rt.new_run()
    with Runtime(url) as again:
        assert run in {r.run_id for r in again.trace.runs()}


READERS = {
    "trace list": ["trace", "list"],
    "trace show": ["trace", "show", "r1"],
    "trace export": ["trace", "export", "r1"],
    "monitor": ["monitor"],
    "ledger list": ["ledger", "list"],
    "approvals list": ["approvals", "list"],
}


def _invoke(command: str, store: str) -> Result:
    _mount()
    return CliRunner(env={"COLUMNS": "200"}).invoke(app, [*READERS[command], "--store", store])


def _one_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if not line.startswith("store: ")]
    assert len(said) == 1, result.stderr
    return said[0]


@pytest.mark.parametrize("command", sorted(READERS))
def test_every_reader_given_a_folder_says_it_is_a_folder(command: str, tmp_path: Path) -> None:
    said = _one_line(_invoke(command, f"sqlite:///{tmp_path}"))
    assert "it is a folder" in said and "--store" in said


@pytest.mark.parametrize("command", sorted(READERS))
def test_every_reader_given_a_file_of_another_program_says_what_to_give_instead(
    command: str, notes: Path
) -> None:
    said = _one_line(_invoke(command, f"sqlite:///{notes}"))
    assert "not a database" in said and "--store" in said
    assert notes.read_bytes() == NOTES
