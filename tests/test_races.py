"""Races on one key, on the default SQLite store: threads and processes, counted at the tool's store."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from actionspace import Runtime, ToolCall
from actionspace.evaluation.sweep import SCHEMA, Bank


def _runtime(folder: Path) -> Runtime:
    bank = Bank(folder / "bank.db")
    rt = Runtime(f"sqlite:///{folder / 'actionspace.db'}", recover_on_start=False)

    def pay(to: str, amount: int) -> dict[str, Any]:
        return bank.pay(to, amount, None)  # no dedupe at the bank: only the ledger stands in the way

    rt.add_tool(name="pay", input_schema=SCHEMA, fn=pay, effect="external", timeout_s=10.0)
    return rt


def _payments(folder: Path) -> int:
    db = sqlite3.connect(folder / "bank.db")
    try:
        return int(db.execute("SELECT count(*) FROM payments").fetchone()[0])
    finally:
        db.close()


def _call(rt: Runtime, amount: int = 7) -> Any:
    return rt.call(
        ToolCall(name="pay", arguments={"to": "bob", "amount": amount}), run_id="race", node_id="n1"
    )


def test_64_threads_with_one_key_on_sqlite_execute_once(tmp_path: Path) -> None:
    rt = _runtime(tmp_path)
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: _call(rt), range(64)))
    rt.close()
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    assert _payments(tmp_path) == 1


def _worker(folder: str, start: Any, out: Any) -> None:
    rt = _runtime(Path(folder))
    start.wait()
    oks = sum(1 for _ in range(16) if _call(rt).ok)
    conflicts = sum(1 for _ in range(4) if (e := _call(rt, amount=999).error) and e.category == "conflict")
    rt.close()
    out.put((oks, conflicts))


def test_4_processes_with_one_key_on_sqlite_execute_once(tmp_path: Path) -> None:
    # both stores exist before the workers start: four processes making a new SQLite file and
    # switching it to WAL at once can find it locked, which is not the race on one key tested here
    Runtime(f"sqlite:///{tmp_path / 'actionspace.db'}", recover_on_start=False).close()
    Bank(tmp_path / "bank.db").db.close()
    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), start, out)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert _payments(tmp_path) == 1
    assert [r[0] for r in results] == [16, 16, 16, 16]  # every caller got the one committed observation
    assert [r[1] for r in results] == [4, 4, 4, 4]  # same node, other arguments: conflict, every time
