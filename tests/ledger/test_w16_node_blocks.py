"""Blocks of a run's node numbers reserved in the shared run-state stores (ledger/run_nodes.py),
and how a runtime on such a store hands them out (pipeline/runs.py ``ReservedNodes``).

Every block the stores hand out, to any number of store objects and threads at once, is disjoint
from every other and starts at or past the floor asked for; a runtime mints its call ids from
them, so no two threads or runtimes on one file name two calls alike, however small the block.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.ledger.run_state import SqliteRunStateStore, open_run_states
from actionspace.pipeline import runs
from tests.pg import fresh_schema

THREADS = 4
BLOCKS_EACH = 25


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
        return
    yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    ran: list[int] = []

    @rt.tool(effect="read")
    def look(x: int) -> int:
        """Look x up."""
        ran.append(x)
        return x

    rt.ran = ran  # type: ignore[attr-defined]
    return rt


def _look(x: int) -> dict[str, Any]:
    return {"name": "look", "arguments": {"x": x}}


def test_blocks_reserved_by_many_stores_and_threads_at_once_never_overlap(url: str) -> None:
    stores = [open_run_states(url), open_run_states(url)]
    blocks: list[tuple[int, int]] = []
    floors = [1, 70, 3, 500]
    go = threading.Barrier(THREADS)

    def reserve(i: int) -> None:
        store = stores[i % 2]
        go.wait()
        for n in range(BLOCKS_EACH):
            count = 1 + (i + n) % 5
            first = store.reserve_nodes("r", floors[i], count)  # type: ignore[attr-defined]
            assert first >= floors[i]
            blocks.append((first, first + count))

    try:
        threads = [threading.Thread(target=reserve, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(blocks) == THREADS * BLOCKS_EACH
        numbers = [n for first, end in blocks for n in range(first, end)]
        assert len(numbers) == len(set(numbers)), "a node number was reserved twice"
        # another run's numbers are its own: they start at its floor
        assert stores[0].reserve_nodes("other", 1, 3) == 1  # type: ignore[attr-defined]
        reopened = open_run_states(url)  # a new process's store: past every block reserved before
        try:
            assert reopened.reserve_nodes("r", 1, 1) >= max(numbers) + 1  # type: ignore[attr-defined]
        finally:
            reopened.close()  # type: ignore[attr-defined]
    finally:
        for store in stores:
            store.close()  # type: ignore[attr-defined]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    floor=st.one_of(st.integers(-5, 3), st.floats(), st.text(max_size=2), st.none(), st.booleans()),
    count=st.one_of(st.integers(-3, 2), st.floats(), st.text(max_size=2), st.none(), st.booleans()),
)
def test_a_block_asked_for_with_a_bad_floor_or_count_is_refused_and_nothing_is_reserved(
    tmp_path: Path, floor: Any, count: Any
) -> None:
    valid = type(floor) is int and type(count) is int and floor >= 0 and count >= 1
    run = uuid.uuid4().hex
    store = SqliteRunStateStore(tmp_path / "h.db")
    try:
        if valid:
            assert store.reserve_nodes(run, floor, count) == floor
            assert store.reserve_nodes(run, 0, 1) == floor + count
            return
        with pytest.raises(ValueError, match="block of node numbers"):
            store.reserve_nodes(run, floor, count)
        assert store.reserve_nodes(run, 0, 1) == 0  # nothing was reserved by the refused one
    finally:
        store.close()


def test_threads_of_one_runtime_mint_distinct_ids_across_many_small_blocks(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runs, "NODE_BLOCK", 3)  # a block runs out every third id
    rt, other = _runtime(url), _runtime(url)
    try:
        rt.call(_look(-1), run_id="conv")
        other.call(_look(-2), run_id="conv")  # another runtime continues the run beside it
        ids: list[str] = []
        go = threading.Barrier(THREADS)

        def calls(runtime: Runtime, base: int) -> None:
            go.wait()
            ids.extend(runtime.call(_look(base + i), run_id="conv").call_id for i in range(20))

        threads = [threading.Thread(target=calls, args=((rt, other)[i % 2], 100 * i)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(ids) == THREADS * 20
        assert len(set(ids)) == len(ids), sorted(ids)
    finally:
        rt.close()
        other.close()


def test_the_memory_store_keeps_its_plain_counter() -> None:
    """One process owns a memory store: its runs count node numbers as before, no block reserved."""
    rt = _runtime("memory://")
    obs = rt.call(_look(1), run_id="conv")
    assert obs.call_id == "conv:n1"
    assert type(rt.run_state("conv").nodes) is itertools.count


def test_the_maker_of_a_run_mints_from_one_without_reserving_and_a_continuer_past_its_block(url: str) -> None:
    maker = _runtime(url)
    try:
        assert [maker.call(_look(i), run_id="conv").call_id for i in range(2)] == ["conv:n1", "conv:n2"]
        assert isinstance(maker.run_state("conv").nodes, runs.ReservedNodes)
    finally:
        maker.close()
    later = _runtime(url)
    try:
        (got,) = [later.call(_look(9), run_id="conv").call_id]
        assert int(got.removeprefix("conv:n")) > runs.NODE_BLOCK
    finally:
        later.close()


def test_a_store_that_cannot_reserve_answers_the_call_typed_and_runs_no_tool(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    maker = _runtime(url)
    maker.call(_look(0), run_id="conv")
    maker.close()
    rt = _runtime(url)
    failing = [True]
    store = rt.engine.runs.run_states
    reserve = store.reserve_nodes  # type: ignore[attr-defined]

    def down(run_id: str, floor: int, count: int) -> int:
        if failing[0]:
            raise sqlite3.OperationalError("disk I/O error")
        return int(reserve(run_id, floor, count))

    monkeypatch.setattr(store, "reserve_nodes", down)
    try:
        for obs in (rt.call(_look(1), run_id="conv"), asyncio.run(rt.acall(_look(2), run_id="conv"))):
            assert obs.status == "error" and obs.error is not None
            assert obs.error.category == "transient" and "disk I/O error" in obs.error.message  # an outage
        assert rt.ran == []  # type: ignore[attr-defined]
        failing[0] = False
        obs = rt.call(_look(3), run_id="conv")
        assert obs.ok and int(obs.call_id.removeprefix("conv:n")) > runs.NODE_BLOCK
        assert rt.ran == [3]  # type: ignore[attr-defined]
    finally:
        rt.close()
