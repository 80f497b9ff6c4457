"""Commands that only read never create nor change a store; a missing store is refused alike.

``ledger list``/``show`` and ``approvals list``/``show`` open what they read read-only: a store that
does not exist, an empty file or a store holding only traces is answered in one line (exit 1), and
the file and its folder are byte for byte as they were. The commands that decide refuse those
stores the same way before writing anything. ``trace list`` on a missing store says so and exits 1
as ``trace show`` does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore
from actionspace.trace.store import open_trace_store
from tests.ledger.factories import entry
from tests.test_cli_ledger import _pending

runner = CliRunner(env={"COLUMNS": "200"})

READS = {
    "ledger list": ["ledger", "list"],
    "ledger show": ["ledger", "show", "as1_x"],
    "approvals list": ["approvals", "list"],
    "approvals show": ["approvals", "show", "apr_x"],
}
DECIDES = {
    "ledger resolve": ["ledger", "resolve", "as1_x", "--outcome", "failed", "--by", "ann", "--reason", "r"],
    "approvals approve": ["approvals", "approve", "apr_x", "--by", "ann"],
    "approvals deny": ["approvals", "deny", "apr_x", "--by", "ann"],
}
EVERY = {**READS, **DECIDES}


def _invoke(args: list[str], store: str) -> Result:
    _mount()
    return runner.invoke(app, [*args, "--store", store])


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: files by their SHA-256, folders as such."""
    seen: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        seen[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return seen


def _refused(result: Result, *expected: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("store: ")]
    assert len(said) == 1, result.stderr
    for part in expected:
        assert part in said[0], said[0]
    return said[0]


@pytest.fixture
def empty_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")
    yield path


@pytest.fixture
def trace_only(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "trace.db"
    open_trace_store(f"sqlite:///{path}").close()
    yield path


@pytest.mark.parametrize("command", sorted(EVERY))
@pytest.mark.parametrize("kind", ["empty_file", "trace_only"])
def test_a_store_with_no_ledger_is_one_line_and_left_byte_for_byte(
    command: str, kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path: Path = request.getfixturevalue(kind)
    before = _snapshot(tmp_path)
    _refused(_invoke(EVERY[command], f"sqlite:///{path}"), "no ledger in", str(path))
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("command", sorted(EVERY))
def test_a_store_that_does_not_exist_is_one_line_and_nothing_is_made(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "as.db"
    _refused(_invoke(EVERY[command], f"sqlite:///{missing}"), "no store at", str(missing))
    assert list(tmp_path.iterdir()) == []


def _recorded(tmp_path: Path) -> Path:
    """A store as a runtime leaves it: a ledger entry and an approval request; no artifacts folder."""
    path = tmp_path / "as.db"
    open_trace_store(f"sqlite:///{path}").close()
    with SqliteLedgerStore(path) as ledger:
        ledger.begin(entry(key="as1_listed", state="unknown_commit"))
    _pending(path)
    return path


@pytest.mark.parametrize("command", sorted(READS))
def test_reading_a_store_changes_nothing_in_it_nor_beside_it(command: str, tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    args = [*READS[command][:2], *(["as1_listed"] if command == "ledger show" else [])]
    args += ["apr_cli"] if command == "approvals show" else []
    before = _snapshot(tmp_path)
    result = _invoke(args, f"sqlite:///{path}")
    assert result.exit_code == 0, result.output
    assert "as1_listed" in result.stdout or "apr_cli" in result.stdout
    assert _snapshot(tmp_path) == before


def test_the_listing_read_only_is_the_listing_of_the_store(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    listed = json.loads(_invoke(["ledger", "list", "--json"], f"sqlite:///{path}").stdout)
    assert [(e["key"], e["state"]) for e in listed] == [("as1_listed", "unknown_commit")]
    shown = json.loads(_invoke(["ledger", "show", "as1_l"], f"sqlite:///{path}").stdout)
    assert shown["key"] == "as1_listed"
    requests = json.loads(_invoke(["approvals", "list", "--json"], f"sqlite:///{path}").stdout)
    assert [(r["id"], r["status"]) for r in requests] == [("apr_cli", "pending")]


def test_approvals_of_a_store_holding_only_approvals_are_read(tmp_path: Path) -> None:
    path = tmp_path / "as.db"
    with SqliteApprovalStore(path):
        pass
    _pending(path)
    before = _snapshot(tmp_path)
    listed = _invoke(["approvals", "list", "--json"], f"sqlite:///{path}")
    assert [r["id"] for r in json.loads(listed.stdout)] == ["apr_cli"]
    _refused(_invoke(["ledger", "list"], f"sqlite:///{path}"), "no ledger in")
    assert _snapshot(tmp_path) == before


def test_trace_list_on_a_store_that_does_not_exist_is_refused_like_trace_show(tmp_path: Path) -> None:
    missing = tmp_path / "none.db"
    listed = _refused(_invoke(["trace", "list"], f"sqlite:///{missing}"), "no trace store at", str(missing))
    shown = _refused(_invoke(["trace", "show", "r1"], f"sqlite:///{missing}"))
    assert listed == shown
    _refused(_invoke(["trace", "list", "--json"], f"sqlite:///{missing}"), "no trace store at")
    assert list(tmp_path.iterdir()) == []


def test_trace_list_on_an_empty_store_still_says_no_runs(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    open_trace_store(f"sqlite:///{path}").close()
    result = _invoke(["trace", "list"], f"sqlite:///{path}")
    assert result.exit_code == 0 and "No runs in" in result.stderr


def _tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("command", sorted(EVERY))
def test_a_postgresql_database_with_no_ledger_gets_no_tables(command: str, pg_url: str) -> None:
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        _refused(_invoke(EVERY[command], url), "no ledger in")
        assert _tables(url) == set()


def test_a_postgresql_ledger_is_listed_in_a_read_only_transaction(pg_url: str) -> None:
    from actionspace.ledger.postgres import PostgresLedgerStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        with PostgresLedgerStore(url) as ledger:
            ledger.begin(entry(key="as1_pg", state="unknown_commit"))
        before = _tables(url)
        listed = json.loads(_invoke(["ledger", "list", "--json"], url).stdout)
        assert [(e["key"], e["state"], e["arguments"]["memo"]) for e in listed] == [
            ("as1_pg", "unknown_commit", "café ☕")
        ]
        _refused(_invoke(["approvals", "list"], url), "no approvals in")
        assert _tables(url) == before
