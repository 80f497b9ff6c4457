"""RecordStore: versions and history, read modes, write modes, transactions, races."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.errors import ToolError
from actionspace.resources import (
    ABSENT,
    Append,
    AtVersion,
    Conditional,
    FileStore,
    Overwrite,
    RecordStore,
    RecordTransaction,
    Transactional,
    value_hash,
)


@pytest.fixture
def store(tmp_path: Path) -> RecordStore:
    return RecordStore(tmp_path / "records.db")


def _category(exc: pytest.ExceptionInfo[ToolError]) -> str:
    return exc.value.error.category


def test_every_write_makes_a_new_version_and_keeps_the_old_one(store: RecordStore) -> None:
    first = store.write("cfg", {"timeout": 30}, mode=Overwrite())
    second = store.write("cfg", {"timeout": 45}, mode=Overwrite())
    assert (first.version, second.version) == (1, 2)
    assert second.hash == value_hash({"timeout": 45})
    assert [r.value for r in store.history("cfg")] == [{"timeout": 30}, {"timeout": 45}]
    assert store.read("missing") is None


def test_a_read_at_version_returns_that_version_or_is_stale(store: RecordStore) -> None:
    store.write("cfg", "v1", mode=Overwrite())
    store.write("cfg", "v2", mode=Overwrite())
    old = store.read("cfg", mode=AtVersion(version=1))
    assert old is not None and old.value == "v1"
    with pytest.raises(ToolError) as exc:
        store.read("cfg", mode=AtVersion(version=7))
    assert _category(exc) == "stale_reference"
    assert exc.value.error.current_version == "2"


def test_a_conditional_write_on_an_outdated_version_is_stale(store: RecordStore) -> None:
    base = store.write("cfg", 1, mode=Overwrite())
    store.write("cfg", 2, mode=Conditional(version=base.version))
    with pytest.raises(ToolError) as exc:
        store.write("cfg", 3, mode=Conditional(version=base.version))
    assert _category(exc) == "stale_reference"
    assert exc.value.error.current_version == "2"
    assert exc.value.error.resource_ids == ("record:cfg",)
    current = store.read("cfg")
    assert current is not None and current.value == 2


def test_a_conditional_write_may_compare_the_content_hash(store: RecordStore) -> None:
    store.write("cfg", {"a": 1}, mode=Conditional(content_hash=ABSENT))
    store.write("cfg", {"a": 2}, mode=Conditional(content_hash=value_hash({"a": 1})))
    with pytest.raises(ToolError) as exc:
        store.write("cfg", {"a": 3}, mode=Conditional(content_hash=value_hash({"a": 1})))
    assert _category(exc) == "stale_reference"


def test_append_adds_to_a_list_and_refuses_other_values(store: RecordStore) -> None:
    store.write("log", "one", mode=Append())
    store.write("log", "two", mode=Append())
    assert store.read("log") is not None and store.history("log")[-1].value == ["one", "two"]
    store.write("scalar", 1, mode=Overwrite())
    with pytest.raises(ToolError) as exc:
        store.write("scalar", 2, mode=Append())
    assert _category(exc) == "invalid_arguments"


def test_a_transaction_makes_its_writes_visible_together_or_not_at_all(store: RecordStore) -> None:
    with store.transaction(key="t1") as tx:
        tx.write("a", 1, mode=Overwrite())
        tx.write("b", 1, mode=Overwrite())
        assert store.read("a") is None  # not visible outside before the commit
        inside = tx.read("a")
        assert inside is not None and inside.value == 1
    assert store.read("a") is not None and store.read("b") is not None
    assert store.committed("t1") is True

    with pytest.raises(ToolError), store.transaction(key="t2") as tx:
        tx.write("a", 2, mode=Conditional(version=1))
        tx.write("b", 2, mode=Conditional(version=99))  # stale: the whole transaction rolls back
    a = store.read("a")
    assert a is not None and a.value == 1
    assert store.committed("t2") is False


def test_a_writer_blocked_by_an_open_transaction_gets_conflict(tmp_path: Path) -> None:
    holder = RecordStore(tmp_path / "r.db")
    impatient = RecordStore(tmp_path / "r.db", lock_timeout_s=0.05)
    holder.write("cfg", 1, mode=Overwrite())
    with holder.transaction() as tx:
        tx.write("cfg", 2, mode=Conditional(version=1))
        with pytest.raises(ToolError) as exc:
            impatient.write("cfg", 3, mode=Conditional(version=1))
    assert _category(exc) == "conflict"
    current = holder.read("cfg")
    assert current is not None and current.value == 2


def _race(store: RecordStore, base: int) -> dict[str, str]:
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def writer(name: str) -> None:
        barrier.wait(timeout=10)
        try:
            store.write("cfg", name, mode=Conditional(version=base))
            outcomes[name] = "ok"
        except ToolError as exc:
            outcomes[name] = exc.error.category

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    return outcomes


def test_two_threads_racing_on_one_version_exactly_one_wins(store: RecordStore) -> None:
    for round_ in range(20):
        base = store.write("cfg", f"base{round_}", mode=Overwrite()).version
        outcomes = _race(store, base)
        assert sorted(outcomes.values()) in (["ok", "stale_reference"], ["conflict", "ok"])
        current = store.read("cfg")
        assert current is not None and current.version == base + 1
        assert outcomes[current.value] == "ok"


def test_a_snapshot_sees_one_consistent_state_under_concurrent_writes(store: RecordStore) -> None:
    store.write("a", 50, mode=Overwrite())
    store.write("b", 50, mode=Overwrite())

    def mover() -> None:
        for _ in range(100):
            with store.transaction() as tx:  # moves one unit from a to b: a + b stays 100
                a, b = tx.read("a"), tx.read("b")
                assert a is not None and b is not None
                tx.write("a", a.value - 1, mode=Conditional(version=a.version))
                tx.write("b", b.value + 1, mode=Conditional(version=b.version))

    thread = threading.Thread(target=mover)
    thread.start()
    snapshots = 0
    while thread.is_alive() or snapshots == 0:
        with store.snapshot() as snap:
            a, b = snap.read("a"), snap.read("b")
            assert a is not None and b is not None
            assert a.value + b.value == 100, (a, b)
            assert snap.versions == {"a": a.version, "b": b.version}
        snapshots += 1
    thread.join(timeout=30)
    final = store.read("a")
    assert final is not None and final.value == -50


def test_the_record_store_is_a_transactional_environment_for_plan_groups(store: RecordStore) -> None:
    assert isinstance(store, Transactional)
    rt = Runtime("memory://", recover_on_start=False)
    rt.environment("records", store)

    @rt.tool(effect="write", writes=["record:{key}"], transaction="records")
    def put(key: str, value: int, transaction: RecordTransaction | None = None) -> int:
        """Set a record, inside the group's transaction when there is one."""
        if transaction is not None:
            return transaction.write(key, value, mode=Conditional(content_hash=ABSENT)).version
        return store.write(key, value, mode=Conditional(content_hash=ABSENT)).version

    store.write("taken", 0, mode=Overwrite())
    nodes = [{"id": k, "tool": "put", "arguments": {"key": k, "value": 1}} for k in ("x", "y", "taken")]
    group = {"id": "g", "nodes": ["x", "y", "taken"]}
    result = rt.run_plan(Plan.from_dict({"nodes": nodes, "groups": [group]}), run_id="with-stale")
    assert result.nodes["taken"].error is not None
    assert result.nodes["taken"].error.category == "stale_reference"
    assert store.read("x") is None and store.read("y") is None  # rolled back together

    ok = rt.run_plan(
        Plan.from_dict({"nodes": nodes[:2], "groups": [{"id": "g", "nodes": ["x", "y"]}]}), run_id="clean"
    )
    assert ok.status == "ok", ok.failed
    assert store.read("x") is not None and store.read("y") is not None


# ---------------------------------------------------------------- no lost update, any interleaving

Counter = tuple[Callable[[], tuple[Any, int]], Callable[[Any, int], None]]
"""read() -> (base, value) and write(base, value) of one shared counter."""


def _records_counter(tmp: Path) -> Counter:
    store = RecordStore(tmp / "c.db")
    store.write("n", 0, mode=Overwrite())

    def read() -> tuple[int, int]:
        found = store.read("n")
        assert found is not None
        return found.version, found.value

    def write(base: int, value: int) -> None:
        store.write("n", value, mode=Conditional(version=base))

    return read, write


def _files_counter(tmp: Path) -> Counter:
    (tmp / "n.txt").write_text("0")
    store = FileStore(tmp)

    def read() -> tuple[str, int]:
        found = store.read("n.txt")
        return found.hash, int(found.text)

    def write(base: str, value: int) -> None:
        store.write("n.txt", str(value), mode=Conditional(content_hash=base))

    return read, write


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    schedule=st.lists(st.integers(min_value=0, max_value=2), min_size=1, max_size=30),
    kind=st.sampled_from(["records", "files"]),
)
def test_no_interleaving_of_conditional_writes_loses_an_update(
    tmp_path_factory: pytest.TempPathFactory, schedule: list[int], kind: str
) -> None:
    """Three clients increment a counter by read-then-conditional-write; the schedule says whose
    step comes next. Every successful write must be counted: the final value is their number."""
    tmp = tmp_path_factory.mktemp(kind)
    read, write = (_records_counter if kind == "records" else _files_counter)(tmp)
    pending: dict[int, tuple[Any, int] | None] = {0: None, 1: None, 2: None}
    succeeded = 0
    for client in schedule:
        step = pending[client]
        if step is None:
            pending[client] = read()
            continue
        base, seen = step
        pending[client] = None
        try:
            write(base, seen + 1)
            succeeded += 1
        except ToolError as exc:
            assert exc.error.category == "stale_reference"
    assert read()[1] == succeeded
