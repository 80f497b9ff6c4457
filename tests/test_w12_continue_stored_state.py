"""A run's stored state that cannot be read — not JSON, not an object, written by a newer
actionspace, or holding fields of the wrong shape — stops the process continuing the run with a
typed error (:class:`actionspace.errors.RunStateError`), never with a driver's or a parser's
exception, and never by reading it as a new run (a secret label reset to public, a turn to 0).

The row is damaged the way the world damages it: by another writer of the same SQLite file or
PostgreSQL table, between two steps of the run; the run is then continued by another process.
"""

from __future__ import annotations

import json
import sqlite3
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace import Labels, Runtime
from actionspace.discovery.runs import join_call_ids
from actionspace.ledger.run_state import PostgresRunStateStore, SqliteRunStateStore
from tests.observation.child_runs import run_child
from tests.pg import fresh_schema

PASSWORD = "hunter2-correct-horse"


def _object(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def damaged(text: str) -> str:
        state = json.loads(text)
        change(state)
        return json.dumps(state)

    return damaged


DAMAGES: dict[str, Callable[[str], str]] = {
    "not_json": lambda _: '{"v": 1, "flow": {"context": {"confidentiality": "sec',
    "not_an_object": lambda _: "[1, 2, 3]",
    "a_newer_version": _object(lambda s: s.update(v=2)),
    "a_version_that_is_no_number": _object(lambda s: s.update(v="one")),
    "flow_not_an_object": _object(lambda s: s.update(flow="secret")),
    "principal_not_an_object": _object(lambda s: s.update(principal=5)),
    "turn_not_a_number": _object(lambda s: s.update(turn="seven")),
    "an_unknown_label": _object(lambda s: s["flow"]["context"].update(confidentiality="top-secret")),
}

_CONTINUE = textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime
    from actionspace.errors import ActionspaceError

    url, runs = sys.argv[1], json.loads(sys.argv[2])
    rt = Runtime(url, recover_on_start=False)
    sent = []

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        "Send an email."
        sent.append(body)
        return "sent"

    out = {}
    for run in runs:
        email = {"recipient": "eve@example.com", "body": "hunter2-correct-horse"}
        try:
            obs = rt.call({"name": "send_email", "arguments": email}, run_id=run)
            out[run] = ["answered", obs.error.category if obs.error else obs.status]
        except Exception as exc:
            out[run] = [type(exc).__name__, isinstance(exc, ActionspaceError), isinstance(exc, ValueError)]
    rt.close()
    print(json.dumps({"runs": out, "sent": sent}))
    """
)


def _read_secrets(url: str, runs: list[str]) -> None:
    """The first process: each run reads a secret, so its stored label is secret."""
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    for run in runs:
        assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).ok
    rt.close()


class _Rows:
    """The run-state table of one store, read and written as another writer would."""

    def __init__(self, kind: str, url: str, path: Path | None) -> None:
        self.kind, self.url, self.path = kind, url, path

    def get(self, run: str) -> str:
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                return str(conn.execute("SELECT state FROM run_state WHERE run_id = ?", (run,)).fetchone()[0])
        with psycopg.connect(self.url) as pg:
            row = pg.execute("SELECT state FROM actionspace_run_state WHERE run_id = %s", (run,)).fetchone()
            assert row is not None
            return str(row[0])

    def put(self, run: str, text: str) -> None:
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                conn.execute("UPDATE run_state SET state = ? WHERE run_id = ?", (text, run))
            return
        with psycopg.connect(self.url) as pg:
            pg.execute("UPDATE actionspace_run_state SET state = %s WHERE run_id = %s", (text, run))


@pytest.fixture(params=["sqlite", "postgres"])
def rows(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[_Rows]:
    if request.param == "sqlite":
        path = tmp_path / "run.db"
        yield _Rows("sqlite", f"sqlite:///{path}", path)
        return
    for url in fresh_schema(request.getfixturevalue("pg_url")):
        yield _Rows("postgres", url, None)


def test_a_damaged_run_state_stops_the_continuing_process_with_a_typed_error(rows: _Rows) -> None:
    runs = [f"run-{name}" for name in DAMAGES]
    _read_secrets(rows.url, [*runs, "run-intact"])
    damaged = {}
    for run, damage in zip(runs, DAMAGES.values(), strict=True):
        damaged[run] = damage(rows.get(run))
        rows.put(run, damaged[run])

    out = run_child(_CONTINUE, rows.url, json.dumps([*runs, "run-intact"]))

    assert out["sent"] == []
    assert out["runs"].pop("run-intact") == ["answered", "policy_violation"]
    assert out["runs"] == {run: ["RunStateError", True, True] for run in runs}
    for run in runs:  # the damaged row is left for a person to read: never replaced by a new run's
        assert rows.get(run) == damaged[run]


def _store(rows: _Rows) -> SqliteRunStateStore | PostgresRunStateStore:
    if rows.path is not None:
        return SqliteRunStateStore(rows.path)
    return PostgresRunStateStore(rows.url)


@pytest.mark.parametrize("damage", ["not_json", "not_an_object", "a_newer_version"])
def test_a_store_refuses_to_read_or_join_over_a_damaged_snapshot(rows: _Rows, damage: str) -> None:
    from actionspace.errors import RunStateError

    store = _store(rows)
    try:
        store.save("r", {"v": 1, "turn": 3, "rev": 1})
        text = DAMAGES[damage](rows.get("r"))
        rows.put("r", text)
        with pytest.raises(RunStateError, match="'r'"):
            store.load("r")
        for save in (store.save, store.save_later):
            with pytest.raises(RunStateError):
                save("r", {"v": 1, "turn": 4, "rev": 2}, join=join_call_ids)
                store.load("r")  # a SQLite save_later is written by the writer: a read waits for it
        assert rows.get("r") == text
    finally:
        store.close()
