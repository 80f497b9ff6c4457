"""An atomic group whose member runs as a blocking tool on a worker thread, cut by ``close()``:
the member goes on with the group's SQLite connection (Python cannot stop its thread), so the
group's rollback, and the close of that connection, must wait until the member has left it. Using
one connection from two threads at once (a rollback or close racing a statement) can kill the
interpreter, so each scenario runs in a child process: a crash is its exit code, not a lost
pytest worker.

The member is held by the test between two steps of its own statement (a cursor with rows left)
while the runtime closes, then released; it must find its connection open and its transaction
its own, and the group must still end as documented: sent, so never committed, its transaction
rolled back once the member returned (the environment's write lock is free again)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.recover import in_flight_here
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from tests.close_tools import WAIT_S, in_thread, until
from tests.plan.settings_table import make_settings_db, rows

_ROOT = Path(__file__).resolve().parents[1]
_PLAN = {
    "nodes": [
        {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}},
        {"id": "b", "tool": "put", "arguments": {"name": "b", "value": "2"}},
    ],
    "groups": [{"id": "apply", "nodes": ["a", "b"]}],
}


def _lock_free(env: Path) -> bool:
    """The environment's write lock can be taken (no transaction of the group holds it)."""
    db = sqlite3.connect(env, timeout=WAIT_S, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        db.execute("ROLLBACK")
        return True
    except sqlite3.Error:
        return False
    finally:
        db.close()


def _child(ledger: str, env_path: str, scenario: str = "close") -> None:
    """One scenario, in this (child) process; prints what it saw as JSON. ``close``: the runtime
    closes while the member is held; ``timeout``: the member outlives its ``timeout_s`` (the
    group fails, its plan ends) and is released once the plan answered."""
    env = Path(env_path)
    timeout = {"timeout_s": 0.2} if scenario == "timeout" else {}
    rt = Runtime(f"sqlite:///{ledger}", recover_on_start=False)
    rt.environment("settings", SqliteEnvironment(env))
    inside, go = threading.Event(), threading.Event()
    errors: list[str] = []
    finished = threading.Event()

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings", **timeout)
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting in two statements, held between two rows of a read when the test asks."""
        assert transaction is not None
        conn = transaction.connection
        try:
            conn.executemany("INSERT OR REPLACE INTO settings VALUES (?, ?)", [(name, value), ("x", "y")])
            cursor = conn.execute("SELECT name FROM settings ORDER BY name")
            cursor.fetchone()  # its statement is under way, rows left
            inside.set()
            go.wait(WAIT_S)
            cursor.fetchall()
            conn.execute("DELETE FROM settings WHERE name = 'x'")
        except BaseException as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            finished.set()
        return value

    run_id = rt.new_run()
    caller, answered = in_thread(lambda: asyncio.run(rt.arun_plan(_PLAN, run_id=run_id)))
    assert inside.wait(WAIT_S), "the member never ran"
    if scenario == "close":
        closer, closed = in_thread(rt.close)
        closer.join(WAIT_S)  # the close cut the plan and returned while the member is held
        assert not closer.is_alive() and closed == [None], closed
    else:  # the member timed out (its attempt left running): the group failed
        until(lambda: rt.engine.executor.abandoned >= 1, "the member's attempt timed out")
    go.set()
    assert finished.wait(WAIT_S)
    caller.join(WAIT_S)
    assert not caller.is_alive() and len(answered) == 1, answered
    if scenario == "timeout":
        rt.close()
    with sqlite3.connect(ledger) as db:
        group_keys = [r[0] for r in db.execute("select key from ledger_entries where node_id like 'group:%'")]
    # the member's thread rolls back, settles the entry, then lets recovery here have the key:
    # recovering before that last step would (rightly) skip an action this process still drives
    until(lambda: not any(in_flight_here(k) for k in group_keys), "the group's rollback ended")
    free = _lock_free(env)  # the rollback ran once the member returned: the lock is free
    with sqlite3.connect(ledger) as db:
        states = [r[0] for r in db.execute("select state from ledger_entries where node_id like 'group:%'")]
    with sqlite3.connect(env) as db:
        keys = db.execute("select count(*) from actionspace_group_commits").fetchone()[0]
    group = answered[0].nodes["apply"]
    with Runtime(f"sqlite:///{ledger}", recover_on_start=False) as again:  # settles what was left unknown
        again.environment("settings", SqliteEnvironment(env))
        again.recover()
        recovered = [e.state for e in again.ledger.list(limit=100) if e.node_id.startswith("group:")]
    print(
        json.dumps(
            {
                "errors": errors,
                "rows": rows(env),
                "lock_free": free,
                "states": states,
                "commit_keys": keys,
                "group": None if group.error is None else group.error.category,
                "recovered": recovered,
            }
        )
    )


def _run_child(tmp_path: Path, scenario: str = "close") -> tuple[int, dict[str, Any] | None, str]:
    env = make_settings_db(tmp_path / "env.db")
    ledger = str(tmp_path / "l.db")
    code = (
        "from tests.test_w11_close_group_blocking import _child; "
        f"_child({ledger!r}, {str(env)!r}, {scenario!r})"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    lines = done.stdout.strip().splitlines()
    seen = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    return done.returncode, seen, done.stderr[-2000:]


@pytest.mark.parametrize("round_", range(3))
def test_a_blocking_member_cut_by_close_keeps_its_connection_until_it_returns(
    tmp_path: Path, round_: int
) -> None:
    code, seen, err = _run_child(tmp_path)
    assert code == 0, f"the child process ended with {code}: {err}"
    assert seen is not None
    assert seen["errors"] == [], seen  # its connection was neither closed nor rolled back under it
    assert seen["lock_free"] is True, seen  # the transaction was rolled back once it returned
    assert seen["rows"] == [] and seen["commit_keys"] == 0, seen  # nothing half-committed
    assert "committed" not in seen["states"] and seen["states"], seen
    assert seen["group"] in ("unknown_commit", "cancelled"), seen
    assert seen["recovered"] == ["accepted"], seen  # proved not committed: proposed again, it runs again


def test_a_blocking_member_past_its_timeout_keeps_its_connection_until_it_returns(tmp_path: Path) -> None:
    """The same hazard without a close: a member that timed out still runs on its thread, so the
    failed group's rollback waits for it too (and the ledger sends nothing meanwhile); once it
    returned, the group ends ``transient``, never committed (on the old code the rollback lands
    right after the timeout, before the test releases the member)."""
    code, seen, err = _run_child(tmp_path, "timeout")
    assert code == 0, f"the child process ended with {code}: {err}"
    assert seen is not None
    assert seen["errors"] == [], seen
    assert seen["lock_free"] is True, seen
    assert seen["rows"] == [] and seen["commit_keys"] == 0, seen
    assert seen["group"] == "transient", seen  # rolled back once its member returned: safe to ask again
    assert seen["states"] == ["failed"] and seen["recovered"] == ["failed"], seen


def test_a_blocking_member_still_queued_when_the_runtime_closes_is_withdrawn_and_rolled_back_at_once(
    tmp_path: Path,
) -> None:
    """A member whose blocking tool waits for a free worker thread (all busy) when the runtime
    closes never runs: nothing uses the transaction, so the group is rolled back at once (its
    write lock free before the busy thread ends), never committed."""
    env = make_settings_db(tmp_path / "env.db")
    rt = Runtime(f"sqlite:///{tmp_path / 'l.db'}", recover_on_start=False, max_threads=1)
    rt.environment("settings", SqliteEnvironment(env))
    hogging, free = threading.Event(), threading.Event()
    calls: list[str] = []

    @rt.tool(effect="read", reads=["hog"], blocking=True)
    def hog() -> bool:
        """Hold the only worker thread until the test frees it."""
        hogging.set()
        return free.wait(WAIT_S)

    @rt.tool(effect="read", reads=["gate"])
    async def gate() -> bool:
        """Let the group begin once the worker thread is taken."""
        return await asyncio.to_thread(hogging.wait, WAIT_S)

    @rt.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting (never reached here: its thread is never free)."""
        calls.append(name)
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    plan = {
        "nodes": [
            {"id": "h", "tool": "hog", "arguments": {}},
            {"id": "g", "tool": "gate", "arguments": {}},
            {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}, "depends_on": ["g"]},
        ],
        "groups": [{"id": "apply", "nodes": ["a"]}],
    }
    caller, answered = in_thread(lambda: asyncio.run(rt.arun_plan(plan, run_id=rt.new_run())))
    pool: Any = rt.engine.executor._pool
    try:
        until(lambda: pool._work_queue.qsize() >= 1, "the member waits for a worker thread")
        rt.close()
        until(lambda: _lock_free(env), "the group's transaction was rolled back")  # the hog still runs
        assert not free.is_set() and calls == []
    finally:
        free.set()
    caller.join(WAIT_S)
    assert not caller.is_alive() and len(answered) == 1, answered
    assert calls == [] and rows(env) == []
    group = answered[0].nodes["apply"]
    assert group.error is not None and group.error.category in ("cancelled", "unknown_commit"), group
