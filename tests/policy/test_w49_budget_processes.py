"""Several real processes (spawned, each with threads) spending one budget kept in SQLite or
PostgreSQL at once: no call runs past the limit, none is charged twice, and what the store holds
afterwards is exactly what the tools really did."""

from __future__ import annotations

import json
import multiprocessing as mp
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Cost, Principal, Runtime
from tests.pg import fresh_schema

LIMIT = 7
THREADS = 3
ATTEMPTS = 6
PER_CALL = 0.25


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str) -> tuple[Runtime, Cost]:
    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    budgets = [Budget(calls=LIMIT, per="principal"), Budget(money=LIMIT * PER_CALL + 0.1, per="principal")]
    return Runtime(url, budgets=budgets, principal=alice, recover_on_start=False), Cost(per_call=PER_CALL)


def _worker(url: str, outbox: str, who: int, start: Any, results: Any) -> None:
    rt, cost = _runtime(url)

    def sent(what: str) -> None:
        with open(outbox, "a") as f:
            f.write(json.dumps(what) + "\n")

    @rt.tool(effect="read", cost=cost)
    def lookup(q: str) -> str:
        """Look something up."""
        sent(q)
        return q

    @rt.tool(effect="write", writes=["note:{q}"], cost=cost)
    def note(q: str) -> str:
        """Write a note."""
        sent(q)
        return q

    outcomes: list[str] = []
    lock = threading.Lock()

    def spend(thread: int) -> None:
        run = f"run-{who}-{thread}"
        for i in range(ATTEMPTS):
            name = "note" if i % 2 else "lookup"
            q = f"{who}.{thread}.{i}"
            obs = rt.call({"name": name, "arguments": {"q": q}}, run_id=run, node_id=f"n{i}")
            with lock:
                outcomes.append("ok" if obs.error is None else obs.error.category)

    start.wait(60)
    threads = [threading.Thread(target=spend, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rt.close()
    results.put(outcomes)


@pytest.mark.parametrize("processes", [2, 4])
def test_processes_sharing_a_budget_never_run_past_it_nor_charge_twice(
    shared_url: str, tmp_path: Path, processes: int
) -> None:
    ctx = mp.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    outbox = tmp_path / "sent.jsonl"
    outbox.touch()
    rt, _ = _runtime(shared_url)
    rt.close()  # the tables exist before the workers race to create them
    workers = [
        ctx.Process(target=_worker, args=(shared_url, str(outbox), n, start, results))
        for n in range(processes)
    ]
    for w in workers:
        w.start()
    start.set()
    outcomes: list[str] = []
    for _ in workers:
        outcomes.extend(results.get(timeout=120))
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    sent = outbox.read_text().splitlines()
    assert len(sent) == LIMIT
    assert len(set(sent)) == LIMIT
    assert outcomes.count("ok") == LIMIT
    assert set(outcomes) == {"ok", "budget_exceeded"}
    again, cost = _runtime(shared_url)
    try:
        assert again.meter is not None
        used = again.meter.used(principal=("alice", "t1"))
        assert used.calls == LIMIT
        assert used.money == pytest.approx(LIMIT * PER_CALL)
        assert again.budget()["calls"] == 0

        @again.tool(effect="read", cost=cost)
        def lookup(q: str) -> str:
            """Look something up."""
            return q

        assert again.estimate({"name": "lookup", "arguments": {"q": "x"}})["fits"] is False
    finally:
        again.close()
