"""Races on one key with the PostgreSQL store: 4 processes, one execution, counted at the tool's store."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.evaluation.sweep import SCHEMA, Bank
from tests.pg import fresh_schema


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _worker(url: str, folder: str, start: Any, out: Any) -> None:
    bank = Bank(Path(folder) / "bank.db")
    rt = Runtime(url, recover_on_start=False)

    def pay(to: str, amount: int) -> dict[str, Any]:
        return bank.pay(to, amount, None)

    rt.add_tool(name="pay", input_schema=SCHEMA, fn=pay, effect="external", timeout_s=10.0)
    start.wait()
    call = ToolCall(name="pay", arguments={"to": "bob", "amount": 7})
    oks = sum(1 for _ in range(16) if rt.call(call, run_id="race", node_id="n1").ok)
    other = ToolCall(name="pay", arguments={"to": "bob", "amount": 999})
    conflicts = sum(
        1
        for _ in range(4)
        if (e := rt.call(other, run_id="race", node_id="n1").error) and e.category == "conflict"
    )
    rt.close()
    out.put((oks, conflicts))


def test_4_processes_with_one_key_on_postgres_execute_once(pg_schema_url: str, tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    # the tool's store made once here: four processes switching a new file to WAL and creating its
    # table at once can find it locked (SQLite answers busy at once rather than risk a deadlock)
    Bank(tmp_path / "bank.db").db.close()
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(pg_schema_url, str(tmp_path), start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=180) for _ in procs]
    for p in procs:
        p.join(30)
    db = sqlite3.connect(tmp_path / "bank.db")
    assert db.execute("SELECT count(*) FROM payments").fetchone()[0] == 1
    assert [r[0] for r in results] == [16] * 4
    assert [r[1] for r in results] == [4] * 4
    rt = Runtime(pg_schema_url, recover_on_start=False)
    entry = rt.ledger.get_node("race", "n1")
    assert entry is not None and entry.state == "committed" and entry.attempts == 1
    assert rt.trace.next_seq("race") > 0
    rt.close()
