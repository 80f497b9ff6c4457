"""RecordStore given keys and values no record can hold, and a database that refuses writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.errors import ToolError
from actionspace.resources import Append, Conditional, Overwrite, RecordStore


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    records = RecordStore(tmp_path / "records.db")
    records.write("k", {"n": 1}, mode=Overwrite())
    return records


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("\ud800", 1),  # a key UTF-8 cannot hold
        ("k", "\udcff"),  # a value UTF-8 cannot hold
        ("k", {"\ud800": 1}),
        ("k", _nested(100_000)),  # deeper than any JSON encoder goes
        ("k", float("nan")),
        ("k", {1j: 2}),
    ],
    ids=["surrogate-key", "surrogate-value", "surrogate-name", "deep", "nan", "complex-key"],
)
def test_a_key_or_value_no_record_can_hold_is_invalid_and_writes_nothing(
    store: RecordStore, key: str, value: Any
) -> None:
    for mode in (Overwrite(), Conditional(version=1), Append()):
        with pytest.raises(ToolError) as exc:
            store.write(key, value, mode=mode)
        assert exc.value.error.category in ("invalid_arguments", "stale_reference"), exc.value.error
    assert [r.version for r in store.history("k")] == [1]
    assert store.read("k") is not None and store.read("k").value == {"n": 1}  # type: ignore[union-attr]


def test_reading_a_key_utf8_cannot_hold_is_invalid_arguments(store: RecordStore) -> None:
    for read in (lambda: store.read("\ud800"), lambda: store.history("\udcff")):
        with pytest.raises(ToolError) as exc:
            read()
        assert exc.value.error.category == "invalid_arguments"


def _limited(monkeypatch: pytest.MonkeyPatch, store: RecordStore, pragma: str) -> None:
    real = RecordStore._connect

    def connect(self: RecordStore) -> sqlite3.Connection:
        conn = real(self)
        conn.execute(pragma)
        return conn

    monkeypatch.setattr(RecordStore, "_connect", connect)


def _pages(store: RecordStore) -> int:
    with sqlite3.connect(store.path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def test_a_full_database_is_a_transient_refusal_and_nothing_is_written(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _limited(monkeypatch, store, f"PRAGMA max_page_count = {_pages(store)}")
    with pytest.raises(ToolError) as exc:
        store.write("big", "x" * 200_000, mode=Overwrite())
    assert exc.value.error.category == "transient" and exc.value.error.retryable
    assert exc.value.error.vendor_code == "SQLITE_FULL"
    with pytest.raises(ToolError), store.transaction(key="tx-full") as tx:
        tx.write("k", {"n": 2}, mode=Overwrite())
        tx.write("big", "x" * 200_000, mode=Overwrite())
    monkeypatch.undo()
    assert store.read("big") is None and store.read("k").value == {"n": 1}  # type: ignore[union-attr]
    assert store.committed("tx-full") is False


def test_a_read_only_database_is_a_permanent_refusal(
    store: RecordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _limited(monkeypatch, store, "PRAGMA query_only = ON")
    with pytest.raises(ToolError) as exc:
        store.write("k", {"n": 2}, mode=Overwrite())
    assert exc.value.error.category == "permanent" and not exc.value.error.retryable
    monkeypatch.undo()
    assert store.read("k").version == 1  # type: ignore[union-attr]


def test_a_transaction_key_committed_twice_is_refused_as_a_conflict_and_writes_nothing(
    store: RecordStore,
) -> None:
    with store.transaction(key="tx-1") as tx:
        tx.write("k", {"n": 2}, mode=Overwrite())
    with pytest.raises(ToolError) as exc, store.transaction(key="tx-1") as tx:
        tx.write("k", {"n": 3}, mode=Overwrite())
    assert exc.value.error.category == "conflict"
    assert store.read("k").value == {"n": 2}  # type: ignore[union-attr]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    key=st.text(max_size=50), value=st.recursive(st.none() | st.text() | st.integers(), lambda c: st.lists(c))
)
def test_any_text_key_and_json_value_is_stored_and_read_back_or_refused_typed(
    store: RecordStore, key: str, value: Any
) -> None:
    try:
        written = store.write(key, value, mode=Overwrite())
    except ToolError as exc:
        assert exc.error.category == "invalid_arguments"
        return
    assert store.read(key) == written and written.value == value
