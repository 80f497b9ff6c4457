"""``scripts/ledger_sql.py`` bounds the bench's durable row by the statements a call runs: it must
run exactly those, on the writing connection's thread, and each must seek, as the store's do.

The script ran an earlier layout's statements (a pending read over the action's columns, which the
table no longer indexes, so it scanned; ``synchronous`` switched twice a call; a ``BEGIN`` and a
``COMMIT`` around the outcome), so it reported a bound no call pays.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ledger_sql.py"
_SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
CALLS = 20


def _shape(sql: str) -> str:
    """A traced statement with its bound values (expanded into the text) as ``?``."""
    sql = re.sub(r"'(?:[^']|'')*'", "?", sql)
    sql = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])", "?", sql)
    return re.sub(r"\bNULL\b", "?", sql)


class _Traced:
    def __init__(self) -> None:
        self.on = False
        self.thread = threading.get_ident()
        self.statements: list[str] = []
        self.last: list[str] = []

    def take(self) -> set[str]:
        """The statements traced since the last take, by shape."""
        self.last, self.statements = self.statements, []
        return {_shape(s) for s in self.last}


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Traced]:
    t = _Traced()
    connect = sqlite3.connect

    def tracing(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(
            lambda sql: t.statements.append(sql) if t.on and threading.get_ident() == t.thread else None
        )
        return conn

    monkeypatch.setattr(sqlite3, "connect", tracing)
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the trace's rows wait for the close
    yield t


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ledger_sql_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _statements_of_calls(path: Path, traced: _Traced) -> set[str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: 3, effect="write", blocking=False)
    try:
        run = rt.new_run()
        for i in range(10 + CALLS):
            traced.on = i >= 10
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", 3)
        traced.on = False
        return traced.take()
    finally:
        rt.close()


def test_the_script_runs_the_statements_of_a_durable_call_and_each_seeks(
    tmp_path: Path, traced: _Traced
) -> None:
    of_calls = _statements_of_calls(tmp_path / "calls.db", traced)
    script = _script()
    run, template = script._made_file(tmp_path / "made.db")
    shutil.copy(tmp_path / "made.db", tmp_path / "a.db")
    traced.take()
    rows, call = script._ledger(tmp_path / "a.db", run, template, [])
    made = [rows(i) for i in range(CALLS)]
    traced.on = True
    parts = [call(m) for m in made]
    traced.on = False
    of_script, expanded = traced.take(), traced.last
    assert of_script == of_calls, (sorted(of_script - of_calls), sorted(of_calls - of_script))
    assert all(len(p) == 4 and all(ns >= 0 for ns in p) for p in parts)
    with sqlite3.connect(tmp_path / "a.db") as db:  # every call's row written and moved
        stored = db.execute(
            "SELECT state, count(*) FROM ledger_entries WHERE node_id LIKE 'm%' GROUP BY state"
        )
        assert stored.fetchall() == [("committed", CALLS)]
        for sql in set(expanded):  # each a seek of an index, no scan of the table (values written in)
            if sql.startswith(("SELECT", "UPDATE", "INSERT")):
                plan = " ".join(
                    row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", [None] * sql.count("?"))
                )
                assert "SCAN" not in plan, (sql, plan)
    db.close()
