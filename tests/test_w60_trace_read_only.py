"""The commands that read a trace (``trace list/show/export/replay``, ``monitor``) never write.

Whatever the store holds — an empty file, only a ledger, or a trace — the file and its folder are
byte for byte as they were after the command: no tables made, no journal mode switched, no
``-wal``/``-shm`` file nor artifacts folder left beside it. A store with no trace is answered in one
line, ``no trace in …``, exit 1. A PostgreSQL database without trace tables gets none.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace.cli import _mount, app
from actionspace.ledger.sqlite import SqliteLedgerStore
from actionspace.trace.sqlite import SqliteTraceStore
from tests.ledger.factories import entry
from tests.trace.factories import calendar_run

runner = CliRunner(env={"COLUMNS": "200"})

RUNTIME = f"{__name__}:fresh_runtime"
COMMANDS = {
    "trace list": ["trace", "list"],
    "trace list --json": ["trace", "list", "--json"],
    "trace show": ["trace", "show", "run-7f"],
    "trace show --json": ["trace", "show", "run-7f", "--json"],
    "trace export": ["trace", "export"],
    "trace export run": ["trace", "export", "run-7f"],
    "trace replay": ["trace", "replay", "run-7f", "--runtime", RUNTIME],
    "monitor": ["monitor"],
    "monitor --json": ["monitor", "--json"],
}


def fresh_runtime() -> Runtime:
    return Runtime("memory://", recover_on_start=False)


def _invoke(args: list[str], store: str) -> Result:
    _mount()
    return runner.invoke(app, [*args, "--store", store] if store else args)


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


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True)  # mode=ro would leave -wal and -shm behind
    try:
        conn.execute("PRAGMA query_only = ON")
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "store"
    made.mkdir()
    return made


@pytest.fixture
def empty_file(folder: Path) -> Iterator[Path]:
    path = folder / "empty.db"
    path.write_bytes(b"")
    yield path


@pytest.fixture
def ledger_only(folder: Path) -> Iterator[Path]:
    path = folder / "ledger.db"
    with SqliteLedgerStore(path) as ledger:
        ledger.begin(entry(key="as1_only", state="unknown_commit"))
    yield path


@pytest.fixture
def traced(folder: Path) -> Iterator[Path]:
    path = folder / "trace.db"
    with SqliteTraceStore(path) as store:
        store.append_many(calendar_run("run-7f3a9c", start=1_700_000_000.0))
        store.append_many(calendar_run("run-81bc02", start=1_700_000_100.0, finished=False))
    yield path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["empty_file", "ledger_only"])
def test_a_store_with_no_trace_is_one_line_and_left_byte_for_byte(
    command: str, kind: str, request: pytest.FixtureRequest, folder: Path
) -> None:
    path: Path = request.getfixturevalue(kind)
    tables = _tables(path)
    before = _snapshot(folder)
    _refused(_invoke(COMMANDS[command], f"sqlite:///{path}"), "no trace in", str(path))
    assert _snapshot(folder) == before
    assert _tables(path) == tables


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_reading_a_trace_changes_nothing_in_it_nor_beside_it(
    command: str, traced: Path, folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    before = _snapshot(folder)
    result = _invoke(COMMANDS[command], f"sqlite:///{traced}")
    assert result.exit_code in ((0, 1) if command == "trace replay" else (0,)), result.output
    assert "error:" not in result.stderr, result.stderr
    assert any(said in result.stdout for said in ("run-7f3a9c", "calls in 2 runs", '"calls": 6', "decisions"))
    assert _snapshot(folder) == before


def test_the_read_only_trace_reads_what_the_store_holds(traced: Path) -> None:
    url = f"sqlite:///{traced}"
    listed = json.loads(_invoke(["trace", "list", "--json"], url).stdout)
    assert [(r["run_id"], r["events"], r["calls"], r["errors"], r["finished"]) for r in listed] == [
        ("run-81bc02", 21, 3, 1, False),
        ("run-7f3a9c", 22, 3, 1, True),
    ]
    shown = json.loads(_invoke(["trace", "show", "run-81", "--json"], url).stdout)
    assert shown == [e.to_dict() for e in calendar_run("run-81bc02", start=1_700_000_100.0, finished=False)]
    exported = _invoke(["trace", "export"], url).stdout.splitlines()
    assert len(exported) == 43
    assert _refused(_invoke(["trace", "show", "run-"], url), "matches several runs")
    assert _refused(_invoke(["trace", "show", "nope"], url), "no run matches 'nope'")


def test_a_trace_of_a_newer_schema_is_refused_unchanged(traced: Path, folder: Path) -> None:
    with sqlite3.connect(traced) as conn:
        conn.execute("UPDATE trace_meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()
    before = _snapshot(folder)
    for command in ("trace list", "trace show", "monitor"):
        _refused(_invoke(COMMANDS[command], f"sqlite:///{traced}"), "schema version 99", "upgrade")
    assert _snapshot(folder) == before


def test_a_missing_store_is_refused_and_nothing_is_made(folder: Path) -> None:
    missing = folder / "none.db"
    for command in sorted(COMMANDS):
        _refused(_invoke(COMMANDS[command], f"sqlite:///{missing}"), "no trace store at", str(missing))
    assert list(folder.iterdir()) == []


def _pg_tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    return {r[0] for r in rows}


def test_a_postgresql_database_with_no_trace_gets_no_tables(pg_url: str) -> None:
    from actionspace.ledger.postgres import PostgresLedgerStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        for command in sorted(COMMANDS):
            _refused(_invoke(COMMANDS[command], url), "no trace in")
        assert _pg_tables(url) == set()
        with PostgresLedgerStore(url) as ledger:
            ledger.begin(entry(key="as1_pg", state="unknown_commit"))
        before = _pg_tables(url)
        for command in sorted(COMMANDS):
            _refused(_invoke(COMMANDS[command], url), "no trace in")
        assert _pg_tables(url) == before


def test_a_postgresql_trace_is_read_in_read_only_transactions(pg_url: str) -> None:
    from actionspace.trace.postgres import PostgresTraceStore
    from tests.pg import fresh_schema

    for url in fresh_schema(pg_url):
        with PostgresTraceStore(url) as store:
            store.append_many(calendar_run("run-7f3a9c", start=1_700_000_000.0))
        listed = json.loads(_invoke(["trace", "list", "--json"], url).stdout)
        assert [(r["run_id"], r["events"], r["calls"], r["finished"]) for r in listed] == [
            ("run-7f3a9c", 22, 3, True)
        ]
        shown = json.loads(_invoke(["trace", "show", "run-7", "--json"], url).stdout)
        assert shown == [e.to_dict() for e in calendar_run("run-7f3a9c", start=1_700_000_000.0)]
        report = json.loads(_invoke(["monitor", "--json"], url).stdout)
        assert report["calls"] == 3
        for wanted in ("run-7f\x00", "\ud800", "run-7f\udcff"):
            _refused(_invoke(["trace", "show", "--store", url, "--", wanted], ""), "no run matches")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(wanted=st.text(st.characters(exclude_categories=()), min_size=1, max_size=12))
def test_any_run_id_asked_for_is_an_answer_never_a_traceback(wanted: str, traced: Path, folder: Path) -> None:
    before = _snapshot(folder)
    for command in ("show", "export", "replay"):
        extra = ["--runtime", RUNTIME] if command == "replay" else []
        result = _invoke(["trace", command, *extra, "--store", f"sqlite:///{traced}", "--", wanted], "")
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        if result.exit_code != 0 and (command != "replay" or "error:" in result.stderr):
            _refused(result, "error: ")
    assert _snapshot(folder) == before
