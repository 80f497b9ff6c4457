"""``actionspace ledger …`` and ``approvals …`` given a store they cannot use: one line, exit 1.

The store URL is the first thing an operator types by hand; a typo, a file of another program or
a store written by a newer actionspace is a mistake to explain, never a traceback, and the file is
left as it was.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace.cli import _mount, app

runner = CliRunner(env={"COLUMNS": "200"})

COMMANDS = {
    "ledger list": ["ledger", "list"],
    "ledger show": ["ledger", "show", "as1_x"],
    "ledger resolve": ["ledger", "resolve", "as1_x", "--outcome", "failed", "--by", "ann", "--reason", "r"],
    "approvals list": ["approvals", "list"],
    "approvals show": ["approvals", "show", "apr_x"],
    "approvals approve": ["approvals", "approve", "apr_x", "--by", "ann"],
    "approvals deny": ["approvals", "deny", "apr_x", "--by", "ann"],
}


def _invoke(command: str, store: str) -> Result:
    _mount()
    return runner.invoke(app, [*COMMANDS[command], "--store", store])


def _one_line_refusal(result: Result, *expected: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    said = [line for line in result.stderr.splitlines() if not line.startswith("store: ")]
    assert len(said) == 1, result.stderr
    for part in expected:
        assert part in said[0], said[0]


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mysql://db/x", "unsupported"),
        ("sqlite://host/x.db", "names a host"),
        ("memory://somewhere", "memory:// takes no path"),
    ],
)
def test_a_malformed_store_url_is_one_line_naming_the_mistake(command: str, url: str, expected: str) -> None:
    _one_line_refusal(_invoke(command, url), expected)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_file_that_is_not_a_database_is_one_line_and_left_as_it_was(command: str, tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 200
    bogus.write_bytes(content)
    _one_line_refusal(_invoke(command, f"sqlite:///{bogus}"), "not a database")
    assert bogus.read_bytes() == content


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_store_of_a_newer_schema_is_one_line_saying_to_upgrade(command: str, tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    Runtime(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE ledger_meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    _one_line_refusal(_invoke(command, f"sqlite:///{path}"), "schema version 99", "upgrade actionspace")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_store_path_through_a_file_is_one_line_and_the_file_left_as_it_was(
    command: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a folder")
    _one_line_refusal(_invoke(command, f"sqlite:///{notes}/as.db"), "notes.txt")
    assert notes.read_text() == "not a folder"


@pytest.mark.parametrize("command", [["trace", "list"], ["trace", "show", "r1"], ["trace", "export", "r1"]])
def test_a_trace_store_path_the_system_refuses_is_a_clear_error(command: list[str], tmp_path: Path) -> None:
    _mount()
    long_name = f"sqlite:///{tmp_path / ('a' * 300)}.db"  # longer than a file name may be
    result = runner.invoke(app, [*command, "--store", long_name])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = " ".join(result.stderr.split())  # the path is longer than a line: joined as one
    assert "Traceback" not in said and "error: cannot open trace store" in said and "too long" in said
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_store_path_with_no_store_is_one_line_and_nothing_is_created(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "as.db"
    _one_line_refusal(_invoke(command, f"sqlite:///{missing}"), "no store at", str(missing))
    assert not (tmp_path / "typo").exists()
