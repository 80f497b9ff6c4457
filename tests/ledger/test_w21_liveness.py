"""Process marks (ledger/liveness.py): a look answers "no other process alive" only when that is
certain. Locks that fail or do not exclude, files it does not know, a half-made mark and a process
forked from the mark's owner all answer "alive" (today's waits stand); a mark released is gone; a
PostgreSQL mark session ended under a live process is taken again, and no look trusts "none" in
between. The marks of killed processes: tests/test_w21_proc_dead_holder_answered_at_once.py.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace.ledger import liveness
from actionspace.ledger.liveness import hold, others_alive
from tests.pg import fresh_schema


class _Store:
    """What a mark reads of a SQLite ledger store: its ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path


@pytest.fixture(autouse=True)
def _no_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(liveness, "LOOK_EVERY_S", 0.0)  # every look looks again


def _elsewhere(*stores: object) -> None:
    """The marks of ``stores`` taken as other processes' (this process's own, a look leaves out:
    tests/ledger/test_w22_marks_of_one_process.py)."""
    for store in stores:
        _, mark = liveness._MARKS[id(store)]
        del liveness._OURS[id(mark)]


def _marks(db: Path) -> list[str]:
    folder = Path(f"{db}-live")
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_two_marks_see_each_other_until_one_is_released(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    one, two = _Store(db), _Store(db)
    drop_one, drop_two = hold(one, "", "sqlite"), hold(two, "", "sqlite")
    _elsewhere(one, two)
    assert others_alive(one) and others_alive(two)
    drop_two()
    assert not others_alive(one)
    assert others_alive(two)  # released: it no longer knows, so it cannot say "none"
    drop_one()
    assert _marks(db) == []


def test_a_mark_kept_while_a_send_still_runs_stays_visible(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    one, two = _Store(db), _Store(db)
    drop_one = hold(one, "", "sqlite")
    running = [True]
    drop_two = hold(two, "", "sqlite", busy=lambda: running[0])
    _elsewhere(two)
    drop_two()  # dropped while busy: kept until it is not
    assert others_alive(one)
    running[0] = False
    _until(lambda: not others_alive(one))
    drop_one()


@pytest.mark.parametrize("failure", ["error", "not_exclusive"])
def test_locks_that_fail_or_do_not_exclude_answer_alive_to_every_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    db = tmp_path / "a.db"
    real = fcntl.flock

    def flock(fd: int, op: int) -> None:
        if failure == "error":
            raise OSError(errno.ENOLCK, "no locks available")

    with monkeypatch.context() as patch:
        patch.setattr(fcntl, "flock", flock)
        unlocked = _Store(db)
        drop_unlocked = hold(unlocked, "", "sqlite")
    assert fcntl.flock is real
    assert [name.endswith(".nolock") for name in _marks(db)] == [True]
    assert others_alive(unlocked)  # it cannot tell anything
    other = _Store(db)
    drop_other = hold(other, "", "sqlite")
    assert others_alive(other)  # a process that could not lock may be alive: never "dead"
    drop_unlocked()
    assert not others_alive(other)
    drop_other()


def test_a_look_whose_lock_probe_fails_answers_alive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "a.db"
    one, two = _Store(db), _Store(db)
    drop_one, drop_two = hold(one, "", "sqlite"), hold(two, "", "sqlite")
    _elsewhere(two)
    real = fcntl.flock

    def flock(fd: int, op: int) -> None:
        raise OSError(errno.EIO, "lost")

    monkeypatch.setattr(fcntl, "flock", flock)
    assert others_alive(one)
    monkeypatch.setattr(fcntl, "flock", real)
    drop_two()
    assert not others_alive(one)
    drop_one()


def test_unknown_files_count_as_alive_half_made_marks_do_not_and_stale_ones_go(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    one = _Store(db)
    drop = hold(one, "", "sqlite")
    folder = Path(f"{db}-live")
    young, stale = folder / "1-young.tmp", folder / "2-stale.tmp"
    young.touch()
    stale.touch()
    old = time.time() - 3600
    os.utime(stale, (old, old))
    assert not others_alive(one)  # a half-made mark's process has written nothing through it
    assert young.exists() and not stale.exists()
    (folder / "notes.txt").write_text("someone's")
    assert others_alive(one)  # not a file it knows: it cannot tell
    (folder / "notes.txt").unlink()
    young.unlink()
    drop()
    assert _marks(db) == []


def test_a_store_without_a_mark_and_a_forked_child_answer_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert others_alive(_Store(tmp_path / "unmarked.db"))
    memory = object()
    drop = hold(memory, "memory://", "memory")
    assert others_alive(memory)  # one process: no mark, nothing certain
    drop()
    one = _Store(tmp_path / "a.db")
    drop_one = hold(one, "", "sqlite")
    assert not others_alive(one)
    mine = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: mine + 1)  # as in a child forked after the mark
    assert others_alive(one)
    monkeypatch.undo()
    drop_one()


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[str]:
    for url in fresh_schema(pg_url):
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE ledger_entries (key text PRIMARY KEY)")
        yield url


def _backends(url: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        oid = conn.execute("SELECT 'ledger_entries'::regclass::oid::bigint").fetchone()
        assert oid is not None
        rows = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2"
            " AND classid = %s::bigint::oid ORDER BY pid",
            (oid[0],),
        ).fetchall()
    return [int(r[0]) for r in rows]


def _until(check: Any, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        assert time.monotonic() < deadline, "never happened"
        time.sleep(0.05)


def test_a_postgres_mark_session_ended_under_a_live_process_is_taken_again(
    pg_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(liveness, "PG_SETTLED_S", 1.0)
    one, two = object(), object()
    drop_one, drop_two = hold(one, pg_store, "postgresql"), hold(two, pg_store, "postgresql")
    _elsewhere(one, two)
    assert others_alive(one)  # its session is too young to trust "none"
    before = _backends(pg_store)
    assert len(before) == 2
    with psycopg.connect(pg_store, autocommit=True) as conn:  # as a server restart does to both
        for pid in before:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    looks = [others_alive(one), others_alive(two)]
    _until(lambda: len(after := _backends(pg_store)) == 2 and not set(after) & set(before))
    looks += [others_alive(one), others_alive(two)]
    assert looks == [True] * 4  # never "none" while the other lives
    drop_two()
    _until(lambda: not others_alive(one))  # once its own session is old enough: none
    drop_one()
    assert _backends(pg_store) == []


def test_a_runtime_that_cannot_hold_its_mark_is_not_opened(tmp_path: Path) -> None:
    """Unmarked, its sends could be taken for a dead process's by the others: it refuses to start."""
    from actionspace import Runtime
    from actionspace.errors import ConfigurationError

    (tmp_path / "a.db-live").write_text("not a folder")
    with pytest.raises(ConfigurationError, match="mark"):
        Runtime(f"sqlite:///{tmp_path / 'a.db'}")
    (tmp_path / "a.db-live").unlink()
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}")  # the same file opens once it can
    rt.close()
