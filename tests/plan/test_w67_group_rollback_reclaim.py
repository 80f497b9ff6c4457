"""A process killed (SIGKILL) after its atomic group rolled back, before it released the group's
hold, leaves nothing charged for the group once reclaimed: a rolled-back group never became
visible, so its members (those that ran and were undone, and those never run) cost nothing; a
committed group stays charged what its members cost."""

from __future__ import annotations

import multiprocessing as mp
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actionspace import Cost, Plan, Principal, Runtime
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.policy.budget import Budget, Usage
from tests.pg import fresh_schema
from tests.plan.settings_table import make_settings_db, rows

BOUND = 1024
CALLS = 5
WHO = ("alice", "t1")
SCOPE = "principal:t1:alice"


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
    else:
        yield from fresh_schema(request.getfixturevalue("pg_url"))


def _runtime(url: str, env_db: Path) -> Runtime:
    alice = Principal(id="alice", scopes=("*",), tenant="t1")
    rt = Runtime(
        url,
        budgets=[Budget(calls=CALLS, per="principal"), Budget(money=float(CALLS), per="principal")],
        principal=alice,
        recover_on_start=False,
    )
    rt.environment("settings", SqliteEnvironment(env_db))

    @rt.tool(
        effect="write",
        writes=["setting:{name}"],
        transaction="settings",
        cost=Cost(per_call=1.0),
        max_observation_bytes=BOUND,
    )
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction; the value "bad" is refused."""
        assert transaction is not None
        if value == "bad":
            raise ValueError("refused value")
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    return rt


def _plan(second: str) -> Plan:
    nodes = [
        {"id": "w1", "tool": "put", "arguments": {"name": "a", "value": "v"}},
        {"id": "w2", "tool": "put", "arguments": {"name": "b", "value": second}},
        {"id": "w3", "tool": "put", "arguments": {"name": "c", "value": "v"}},
    ]
    return Plan.from_dict({"nodes": nodes, "groups": [{"id": "apply", "nodes": ["w1", "w2", "w3"]}]})


def _worker(url: str, env_db: str, second: str, crash_at: str) -> None:
    from actionspace import _crash

    _crash.arm(crash_at)
    rt = _runtime(url, Path(env_db))
    rt.run_plan(_plan(second), run_id="killed")


def _raw_usage(url: str) -> tuple[float, ...]:
    """The principal's usage row as stored, read without a meter (which would reclaim)."""
    sql = "SELECT calls, items, bytes, money FROM budget_usage WHERE scope = "
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            row = conn.execute(sql + "?", (SCOPE,)).fetchone()
    else:
        with psycopg.connect(url) as pg:
            row = pg.execute(sql + "%s", (SCOPE,)).fetchone()
    return (0, 0, 0, 0.0) if row is None else tuple(float(v) for v in row)


def _killed(url: str, tmp_path: Path, second: str, crash_at: str) -> Path:
    env_db = make_settings_db(tmp_path / "env.db")
    _runtime(url, env_db).close()
    worker = mp.get_context("spawn").Process(target=_worker, args=(url, str(env_db), second, crash_at))
    worker.start()
    worker.join(120)
    assert worker.exitcode == -signal.SIGKILL
    return env_db


def test_a_process_killed_after_its_group_rolled_back_is_charged_nothing_for_the_group(
    shared_url: str, tmp_path: Path
) -> None:
    env_db = _killed(shared_url, tmp_path, "bad", "after_response")
    counted = _raw_usage(shared_url)
    rt = _runtime(shared_url, env_db)  # opening its meter reclaims for the dead
    try:
        assert rt.meter is not None
        assert counted[0] >= 1  # the unreleased hold was still counted when its process died
        assert rt.meter.used(principal=WHO) == Usage()
        assert rt.meter.reclaim() == 0
        assert rt.budget()["calls"] == CALLS
        assert rows(env_db) == []
    finally:
        rt.close()


def test_a_process_killed_after_its_group_committed_stays_charged_what_its_members_cost(
    shared_url: str, tmp_path: Path
) -> None:
    env_db = _killed(shared_url, tmp_path, "v", "after_ledger_commit")
    rt = _runtime(shared_url, env_db)
    try:
        assert rt.meter is not None
        used = rt.meter.used(principal=WHO)
        assert (used.calls, used.items, used.money) == (3, 3, 3.0)
        assert rt.budget()["calls"] == CALLS - 3
        assert rows(env_db) == [("a", "v"), ("b", "v"), ("c", "v")]
    finally:
        rt.close()
