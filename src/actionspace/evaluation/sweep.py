"""The crash sweep: SIGKILL at every ledger boundary, restart, recover, finish; count at the tool's store.

For each (crash point, tool idempotency kind, seed) a forked child runs a small payment workload
against a SQLite store (ledger, approvals, trace) and a bank in its own SQLite file, and kills
itself with SIGKILL the n-th time it reaches the point (n drawn from the seed). A second child
then starts fresh, runs ``recover()`` and the same workload again (same run, same nodes). The bank
is then compared with the ledger: no payment twice, no committed payment missing, and every
ambiguity of a ``none`` tool reported as ``unknown_commit``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actionspace import _crash
from actionspace.ledger.open import open_ledger
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer

# Loaded here, in the process that forks every case's children, so each child inherits the
# runtime instead of importing it again (about 0.3 s a child, two children a case).
from actionspace.runtime import Runtime
from actionspace.types import ToolCall

__all__ = ["KINDS", "Bank", "CaseResult", "run_case", "sweep"]

KINDS: tuple[str, ...] = ("native", "query", "none")
CALLS = 6
CASE_TIMEOUT_S = 120.0
"""A run of the workload still alive after this long is killed and reported as a problem: it hung,
which is not the crash the case is about (a kill then lands anywhere, or nowhere near the point)."""
HITS = {"during_purge": 1, "during_approval_decision": 2, "during_observation_write": 2 * CALLS}
"""How often the workload reaches a point, when that differs from once per call."""
RUN_ID = "sweep"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "integer"}},
    "required": ["to", "amount"],
    "additionalProperties": False,
}


class Bank:
    """The tool's own store: one row per payment that really happened."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        if self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":  # switching takes a lock
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS payments"
            " (id INTEGER PRIMARY KEY, to_ TEXT, amount INTEGER, key TEXT UNIQUE)"
        )

    def pay(self, to: str, amount: int, key: str | None) -> dict[str, Any]:
        _crash.point("tool_received")
        self.db.execute(
            "INSERT OR IGNORE INTO payments (to_, amount, key) VALUES (?, ?, ?)", (to, amount, key)
        )
        _crash.point("tool_committed")
        if key is None:
            row = self.db.execute("SELECT max(id) FROM payments WHERE amount = ?", (amount,)).fetchone()
            return {"id": row[0], "amount": amount}
        found = self.find(key)
        assert found is not None
        return found

    def find(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT id, amount FROM payments WHERE key = ?", (key,)).fetchone()
        return {"id": row[0], "amount": row[1]} if row else None

    def status(self, *, key: str, arguments: dict[str, Any]) -> StatusAnswer:
        found = self.find(key)
        return Committed(found, remote_id=str(found["id"])) if found else NotCommitted()

    def counts(self) -> dict[int, int]:
        rows = self.db.execute("SELECT amount, count(*) FROM payments GROUP BY amount").fetchall()
        return {int(a): int(c) for a, c in rows}


def _workload(folder: Path, kind: str) -> None:
    bank = Bank(folder / "bank.db")
    rt = Runtime(f"sqlite:///{folder / 'actionspace.db'}", recover_on_start=False)
    options: dict[str, Any] = {"effect": "external", "idempotency": kind, "timeout_s": 10.0}
    if kind == "none":

        def pay(to: str, amount: int) -> dict[str, Any]:
            return bank.pay(to, amount, None)

    else:

        def pay(to: str, amount: int, idempotency_key: str) -> dict[str, Any]:  # type: ignore[misc]
            return bank.pay(to, amount, idempotency_key)

    if kind == "query":
        options["status_query"] = bank.status
    rt.add_tool(name="pay", input_schema=SCHEMA, fn=pay, **options)
    rt.add_tool(name="pay_big", input_schema=SCHEMA, fn=pay, requires_approval=True, **options)
    rt.recover()
    for i in range(CALLS):
        tool = "pay_big" if i % 3 == 2 else "pay"
        call = ToolCall(
            name=tool, arguments={"to": "bob", "amount": i}, provenance={"to": "user", "amount": "user"}
        )
        obs = rt.call(call, run_id=RUN_ID, node_id=f"n{i}")
        if obs.error is not None and obs.error.category == "needs_approval":
            rt.approvals.approve(str(obs.error.details["request_id"]), by="sweep", reason="workload")
            rt.call(call, run_id=RUN_ID, node_id=f"n{i}")
        if i == CALLS // 2:
            rt.purge()
    rt.close()


def _child(folder: str, kind: str, point: str | None, hit: int) -> None:
    _crash.arm(point, hit)
    try:
        _workload(Path(folder), kind)
    except BaseException:
        os._exit(3)
    os._exit(0)


@dataclass
class CaseResult:
    point: str
    kind: str
    seed: int
    crashed: bool
    duplicates: int = 0
    lost: int = 0
    unknown_commit: int = 0
    incomplete: int = 0
    """Nodes neither committed nor honestly unknown after the restart (must be 0)."""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.incomplete or self.problems)


HUNG = "hung"
"""What :func:`_run` returns for a run killed because it outlived :data:`CASE_TIMEOUT_S`."""


def _run(folder: Path, kind: str, point: str | None, hit: int) -> int | str | None:
    """The workload in a forked child: its exit code (``-SIGKILL`` for the armed crash), or
    :data:`HUNG` when it had to be killed."""
    ctx = mp.get_context("fork")
    proc = ctx.Process(target=_child, args=(str(folder), kind, point, hit))
    proc.start()
    proc.join(CASE_TIMEOUT_S)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return HUNG
    return proc.exitcode


def run_case(point: str, kind: str, seed: int, folder: Path) -> CaseResult:
    """One crash, one restart, and the comparison of the bank with the ledger."""
    hit = random.Random(f"{point}/{kind}/{seed}").randint(1, HITS.get(point, CALLS))
    first = _run(folder, kind, point, hit)
    result = CaseResult(point, kind, seed, crashed=first == -signal.SIGKILL)
    if first == HUNG:
        result.problems.append(f"the first run did not end within {CASE_TIMEOUT_S:g} s and was killed")
    elif first not in (0, -signal.SIGKILL):
        result.problems.append(f"first run exited {first}")
    second = _run(folder, kind, None, 0)
    if second == HUNG:
        result.problems.append(f"the restart did not end within {CASE_TIMEOUT_S:g} s and was killed")
        return result
    if second != 0:
        result.problems.append(f"restart exited {second}")
        return result
    counts = Bank(folder / "bank.db").counts()
    ledger = open_ledger(f"sqlite:///{folder / 'actionspace.db'}")
    try:
        for i in range(CALLS):
            paid = counts.get(i, 0)
            entry = ledger.get_node(RUN_ID, f"n{i}")
            state = entry.state if entry is not None else "missing"
            if paid > 1:
                result.duplicates += paid - 1
            if state == "committed" and paid == 0:
                result.lost += 1
            if state == "unknown_commit":
                result.unknown_commit += 1
                if kind != "none":
                    result.problems.append(f"n{i}: unknown_commit for a {kind} tool")
            elif state != "committed":
                result.incomplete += 1
    finally:
        ledger.close()
    return result


def sweep(
    *,
    seeds: int,
    points: Sequence[str] = _crash.POINTS,
    kinds: Sequence[str] = KINDS,
    progress: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every point × kind × seed; each case in its own temp folder."""
    out: list[CaseResult] = []
    for point in points:
        for kind in kinds:
            for seed in range(seeds):
                with tempfile.TemporaryDirectory(prefix="actionspace-sweep-") as tmp:
                    result = run_case(point, kind, seed, Path(tmp))
                out.append(result)
                if progress is not None:
                    progress(result)
    return out


def table(results: Iterable[CaseResult]) -> list[dict[str, Any]]:
    """Rows per (point, kind): cases, crashed, duplicates, lost, unknown_commit, incomplete, problems."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in results:
        row = rows.setdefault((r.point, r.kind), {"point": r.point, "kind": r.kind, "cases": 0, "crashed": 0,
                                                  "duplicates": 0, "lost": 0, "unknown_commit": 0,
                                                  "incomplete": 0, "problems": 0})  # fmt: skip
        row["cases"] += 1
        row["crashed"] += int(r.crashed)
        row["duplicates"] += r.duplicates
        row["lost"] += r.lost
        row["unknown_commit"] += r.unknown_commit
        row["incomplete"] += r.incomplete
        row["problems"] += len(r.problems)
    return list(rows.values())
