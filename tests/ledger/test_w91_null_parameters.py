"""SQL NULL bound through a kept ``NoneType`` adapter (ledger/_sqlite_null.py), not through
``sqlite3``'s failed ``PrepareProtocol.__adapt__`` lookup, with what is written unchanged.

- Every ``None`` a durable call binds on its thread (six or seven a call: the intent's four, the
  outcome's) is answered by the registry's kept entry, a C function (the code before had none:
  ``KeyError``).
- Over generated parameters, what a statement binds and stores with the entry is what it binds
  and stores with the registry's own course (the entry removed), value and type alike.
- The ledger's rows of durable calls are the same column for column (types, and values but the
  clock's and the run's) with the entry and without it.
- A ``NoneType`` adapter registered before is kept.
"""

from __future__ import annotations

import importlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall

KEY = (type(None), sqlite3.PrepareProtocol)


def _put(key: str, value: int) -> int:
    return 3


def _runtime(path: Path) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
    return rt, rt.new_run()


@pytest.fixture
def registry() -> Iterator[dict[Any, Any]]:
    """``sqlite3.adapters``, its ``NoneType`` entry put back as it was afterwards."""
    kept = sqlite3.adapters.get(KEY)
    try:
        yield sqlite3.adapters
    finally:
        if kept is None:
            sqlite3.adapters.pop(KEY, None)
        else:
            sqlite3.adapters[KEY] = kept


def test_each_none_a_durable_call_binds_is_answered_by_the_kept_adapter(
    tmp_path: Path, registry: dict[Any, Any]
) -> None:
    installed = registry[KEY]
    assert installed(None) is None
    assert type(installed) is type(len)  # a C function: no frame of its own
    me, counted = threading.get_ident(), [0, 0]

    def counting(value: Any) -> Any:
        counted[threading.get_ident() != me] += 1
        return installed(value)

    rt, run = _runtime(tmp_path / "a.db")
    try:
        for i in range(5):  # the run's first calls take the stages
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        registry[KEY] = counting
        for i in range(20):
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", 3)
    finally:
        registry[KEY] = installed
        rt.close()
    assert counted[0] >= 6 * 20  # the intent's four, the outcome's


PARAMS = st.lists(
    st.none()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8).filter(lambda t: "\x00" not in t)
    | st.binary(max_size=8)
    | st.booleans(),
    min_size=1,
    max_size=6,
)


def _written(params: list[Any]) -> list[Any]:
    db = sqlite3.connect(":memory:")
    try:
        columns = ", ".join(f"c{i}" for i in range(len(params)))
        db.execute(f"CREATE TABLE t ({columns})")
        db.execute(f"INSERT INTO t VALUES ({', '.join('?' * len(params))})", params)
        typed = ", ".join(f"c{i}, typeof(c{i})" for i in range(len(params)))
        return list(db.execute(f"SELECT {typed} FROM t").fetchall())
    finally:
        db.close()


@settings(max_examples=200, deadline=None)
@given(params=PARAMS)
def test_what_is_bound_and_stored_is_the_registrys_own_course(params: list[Any]) -> None:
    installed = sqlite3.adapters[KEY]
    try:
        with_entry = _written(params)
        del sqlite3.adapters[KEY]
        without = _written(params)
    finally:
        sqlite3.adapters[KEY] = installed
    assert with_entry == without


_ROW = (
    "SELECT node_id, tool, args_digest, arguments, state, attempts, typeof(remote_id), remote_id, "
    "typeof(observation), typeof(error), error, typeof(resolution), resolution, typeof(created_at) "
    "FROM ledger_entries ORDER BY node_id"
)


def _ledger_rows(path: Path) -> list[Any]:
    rt, run = _runtime(path)
    try:
        for i in range(6):
            rt.call(ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}")
    finally:
        rt.close()
    db = sqlite3.connect(path)
    try:
        return list(db.execute(_ROW).fetchall())
    finally:
        db.close()


def test_the_ledgers_rows_are_those_of_the_registrys_own_course(
    tmp_path: Path, registry: dict[Any, Any]
) -> None:
    with_entry = _ledger_rows(tmp_path / "a.db")
    del registry[KEY]
    without = _ledger_rows(tmp_path / "b.db")
    assert len(with_entry) == 6
    assert with_entry == without
    assert {row[6] for row in with_entry} == {"null"}  # no remote id: bound as NULL both ways


def test_a_none_adapter_registered_before_is_kept(registry: dict[Any, Any]) -> None:
    def own(value: Any) -> Any:
        return None

    registry[KEY] = own
    _sqlite_null = importlib.import_module("actionspace.ledger._sqlite_null")
    importlib.reload(_sqlite_null)
    assert registry[KEY] is own
    del registry[KEY]
    importlib.reload(_sqlite_null)
    assert registry[KEY] is _sqlite_null.NULL
