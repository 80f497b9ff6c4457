"""An atomic group's budget hold, left behind by a process killed (SIGKILL) while the group ran, is
reclaimed from the shared store (SQLite, PostgreSQL) as the group's ledger entry says: a group never
sent frees its whole hold; a group whose intent is on disk stays charged what it would have been
charged had it completed, without the observation bytes nobody was shown (one call, its items and
their money per member, whether the member had drawn on the hold or not, read or write); and the
reclaim never raises what the store counted, so no other process could have spent past a limit
in between."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actionspace import Cost, Plan, Principal, Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.policy.budget import Budget, Usage
from tests.pg import fresh_schema
from tests.plan.settings_table import make_settings_db, rows

BOUND = 2048
"""``max_observation_bytes`` of the tools below."""
CALLS = 6
"""The principal's calls budget."""
WHO = ("alice", "t1")
SCOPE = "principal:t1:alice"
COMPLETED = Usage(calls=3, items=3, bytes=0, money=3.0)
"""What the three-member group is charged when completed, without its observation bytes."""


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str, env_db: Path, sent: Path) -> Runtime:
    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    rt = Runtime(
        url,
        budgets=[
            Budget(calls=CALLS, per="principal"),
            Budget(money=float(CALLS), per="principal"),
            Budget(bytes=20 * BOUND, per="principal"),
        ],
        principal=alice,
        recover_on_start=False,
    )
    rt.environment("settings", SqliteEnvironment(env_db))

    def noted(what: str) -> None:
        with open(sent, "a") as f:
            f.write(what + "\n")

    @rt.tool(
        effect="write",
        writes=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; "hang" never returns."""
        assert transaction is not None
        noted(name)
        if value == "hang":
            time.sleep(600)
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    @rt.tool(
        effect="read",
        reads=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def peek(name: str, transaction: SqliteTransaction | None = None) -> str:
        """Read a setting inside the group's transaction."""
        assert transaction is not None
        noted(f"peek {name}")
        row = transaction.connection.execute("SELECT value FROM settings WHERE name = ?", (name,)).fetchone()
        return "" if row is None else str(row[0])

    @rt.tool(effect="write", writes=["note:{q}"], cost=Cost(per_call=1.0), max_observation_bytes=BOUND)
    def note(q: str) -> str:
        """Write a note outside any group."""
        noted(f"note {q}")
        return q

    return rt


def _plan(last: str) -> Plan:
    nodes = [
        {"id": "w1", "tool": "put", "arguments": {"name": "a", "value": "v"}},
        {"id": "r1", "tool": "peek", "arguments": {"name": "a"}},
        {"id": "w2", "tool": "put", "arguments": {"name": "b", "value": last}},
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["w1", "r1", "w2"]}]})


def _worker(url: str, env_db: str, sent: str, crash_at: str | None) -> None:
    from actionspace import _crash

    _crash.arm(crash_at)
    rt = _runtime(url, Path(env_db), Path(sent))
    rt.run_plan(_plan("v" if crash_at else "hang"), run_id="killed")


def _wait_for(path: Path, text: str, deadline_s: float = 60.0) -> None:
    end = time.monotonic() + deadline_s
    while text not in (path.read_text().splitlines() if path.exists() else []):
        assert time.monotonic() < end, f"{text!r} never reached {path}"
        time.sleep(0.02)


def _raw_usage(url: str) -> tuple[float, ...]:
    """The principal's usage row as the store holds it, read without a meter (so nothing is
    reclaimed by reading it)."""
    sql = "SELECT calls, items, bytes, money FROM budget_usage WHERE scope = "
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            row = conn.execute(sql + "?", (SCOPE,)).fetchone()
    else:
        with psycopg.connect(url) as pg:
            row = pg.execute(sql + "%s", (SCOPE,)).fetchone()
    return (0, 0, 0, 0.0) if row is None else tuple(float(v) for v in row)


def _killed_group(url: str, tmp_path: Path, crash_at: str | None) -> tuple[Path, Path]:
    sent, env_db = tmp_path / "sent.txt", make_settings_db(tmp_path / "env.db")
    _runtime(url, env_db, sent).close()
    worker = mp.get_context("spawn").Process(target=_worker, args=(url, str(env_db), str(sent), crash_at))
    worker.start()
    try:
        if crash_at is None:  # killed inside its third member, the first two done, all three drawn
            _wait_for(sent, "b")
    finally:
        if crash_at is None:
            assert worker.pid is not None
            os.kill(worker.pid, signal.SIGKILL)
        worker.join(60)
    assert worker.exitcode == -signal.SIGKILL
    return sent, env_db


@pytest.mark.parametrize(
    ("crash_at", "charged"),
    [("before_intent", Usage()), ("after_intent", COMPLETED), (None, COMPLETED)],
    ids=["before_intent", "after_intent", "inside_members"],
)
def test_a_killed_groups_hold_is_settled_as_its_ledger_entry_says(
    shared_url: str, tmp_path: Path, crash_at: str | None, charged: Usage
) -> None:
    sent, env_db = _killed_group(shared_url, tmp_path, crash_at)
    counted = _raw_usage(shared_url)
    rt = _runtime(shared_url, env_db, sent)  # opening its meter reclaims for the dead
    try:
        assert rt.meter is not None
        used = rt.meter.used(principal=WHO)
        assert used == charged
        left = (used.calls, used.items, used.bytes, used.money)
        assert all(after <= before + 1e-9 for after, before in zip(left, counted, strict=True)), counted
        assert rt.meter.reclaim() == 0  # settled once, never twice
        assert rt.meter.used(principal=WHO) == charged
        assert rt.budget()["calls"] == CALLS - charged.calls
        run, ran = rt.new_run(), 0
        for n in range(CALLS + 1):
            obs = rt.call({"name": "note", "arguments": {"q": f"n{n}"}}, run_id=run)
            if not obs.ok:
                assert obs.error is not None and obs.error.category == "budget_exceeded", obs.error
                break
            ran += 1
        assert ran == CALLS - charged.calls
        assert rows(env_db) == []  # the killed group's transaction never committed
    finally:
        rt.close()
