"""The resource stores under hostile names, special files, other processes and refusing disks."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace.errors import ToolError
from actionspace.resources import (
    Append,
    Conditional,
    FileStore,
    GroupWrite,
    Overwrite,
    RecordStore,
    RenameStep,
)
from actionspace.resources.journal import TEMP_SUFFIX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    base.mkdir()
    (base / "a.txt").write_text("alpha")
    return base


def _within(seconds: float, operation: Callable[[], Any]) -> BaseException | None:
    """Run ``operation`` in a thread; the exception it raised (None if none). Fails if it hangs."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            operation()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still blocked after {seconds}s"
    return outcome[0]


def test_a_fifo_in_the_root_is_refused_at_once_never_waited_on(root: Path) -> None:
    fifo = root / "pipe"
    os.mkfifo(fifo)
    store = FileStore(root)
    try:
        for operation in (
            lambda: store.read("pipe"),
            lambda: store.write("pipe", "x", mode=Append()),
            lambda: store.write("pipe", "x", mode=Overwrite()),
            lambda: store.check({"pipe": "absent"}),
        ):
            exc = _within(5, operation)
            assert isinstance(exc, ToolError) and exc.error.category == "invalid_arguments", exc
    finally:  # unblock an open that waits for the other end, so no thread stays behind
        for flags in (os.O_RDONLY | os.O_NONBLOCK, os.O_WRONLY | os.O_NONBLOCK):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, flags))
    assert fifo.exists() and not fifo.is_file()


@pytest.mark.parametrize(
    "path",
    [
        "x/../.actionspace/lock",
        "./.actionspace/journal",
        ".actionspace/",
        "a.txt/../.a.txt.0123456789ab.as-tmp",
    ],
)
def test_reserved_names_stay_reserved_under_any_spelling(root: Path, path: str) -> None:
    store = FileStore(root)
    with pytest.raises(ToolError) as exc:
        store.write(path, "x", mode=Overwrite())
    assert exc.value.error.category == "invalid_arguments"


def test_lookalike_names_are_other_files_inside_the_root(root: Path) -> None:
    store = FileStore(root)
    for name in ("\uff0eactionspace", "a\u2024txt", "\u202etxt.a", "a.txt\u200b"):
        written = store.write(name, name, mode=Overwrite())
        assert written.path == name and (root / name).read_text() == name
    assert (root / "a.txt").read_text() == "alpha"


def _refusing(monkeypatch: pytest.MonkeyPatch, name: str, code: int, when: Callable[[Any], bool]) -> None:
    real = getattr(os, name)

    def refused(*args: Any, **kwargs: Any) -> Any:
        if when(args[0]):
            raise OSError(code, os.strerror(code))
        return real(*args, **kwargs)

    monkeypatch.setattr(os, name, refused)


def test_a_lock_file_the_process_may_not_open_is_a_typed_refusal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(root)
    _refusing(monkeypatch, "open", errno.EACCES, lambda p: os.fsdecode(p).endswith("lock"))
    for operation in (
        lambda: store.read("a.txt"),
        lambda: store.write("a.txt", "x", mode=Overwrite()),
        lambda: store.apply_group([GroupWrite(path="a.txt", content=b"x", expected_hash=None)]),
    ):
        with pytest.raises(ToolError) as exc:
            operation()
        assert exc.value.error.category == "permanent" and exc.value.error.vendor_code == "EACCES"
    monkeypatch.undo()
    assert (root / "a.txt").read_text() == "alpha"


class Crash(Exception):
    """Stands for the process dying between two renames."""


def _crash_second(step: RenameStep) -> None:
    raise Crash(step.path)


def test_a_disk_full_while_finishing_another_process_switch_is_a_typed_refusal(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "b.txt").write_text("beta")
    survivor = FileStore(root)
    writes = [GroupWrite(path=p, content=b"new", expected_hash=None) for p in ("a.txt", "b.txt")]
    with pytest.raises(Crash):
        FileStore(root, between_renames=_crash_second).apply_group(writes, key="k")
    _refusing(monkeypatch, "replace", errno.ENOSPC, lambda p: True)
    with pytest.raises(ToolError) as exc:
        survivor.write("c.txt", "x", mode=Overwrite())
    assert exc.value.error.category == "transient" and exc.value.error.retryable
    monkeypatch.undo()
    assert not (root / "c.txt").exists()
    survivor.write("c.txt", "x", mode=Overwrite())
    assert [(root / p).read_text() for p in ("a.txt", "b.txt", "c.txt")] == ["new", "new", "x"]


def test_a_disk_full_while_writing_the_journal_switches_nothing_and_leaves_nothing(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(root)
    real = os.write

    def full_for_journals(fd: int, data: Any) -> int:
        if b'"journal"' in bytes(data) or b'"entries"' in bytes(data):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full_for_journals)
    with pytest.raises(ToolError) as exc:
        store.apply_group([GroupWrite(path="a.txt", content=b"new", expected_hash=None)], key="k")
    monkeypatch.undo()
    assert exc.value.error.category == "transient"
    assert (root / "a.txt").read_text() == "alpha" and store.committed("k") is False
    assert [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX) or p.suffix in (".json", ".bak")] == []


def _appender(root: str, tag: str, count: int) -> None:
    store = FileStore(root, lock_timeout_s=30)
    for n in range(count):
        store.write("log.txt", f"{tag}{n:04d}\n", mode=Append())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_two_processes_appending_and_switching_lose_nothing_and_tear_nothing(root: Path) -> None:
    count = 60
    pids = []
    for tag in ("p", "q"):
        pid = os.fork()
        if pid == 0:  # the child appends, then leaves without running any pytest machinery
            code = 1
            try:
                _appender(str(root), tag, count)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    store = FileStore(root, lock_timeout_s=30)
    for n in range(20):
        store.apply_group([GroupWrite(path=p, content=str(n).encode(), expected_hash=None) for p in "xy"])
        with store.snapshot() as snap:
            assert snap.read("x").content == snap.read("y").content
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    lines = (root / "log.txt").read_text().splitlines()
    assert sorted(lines) == sorted(f"{t}{n:04d}" for t in "pq" for n in range(count))


class _FullAtCommit:
    """A connection whose commit record does not fit on the disk (SQLite's SQLITE_FULL)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("INSERT INTO transaction_commits"):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorcode = sqlite3.SQLITE_FULL
            exc.sqlite_errorname = "SQLITE_FULL"
            raise exc
        return self.conn.execute(sql, *args)

    def close(self) -> None:
        self.conn.close()


def test_a_full_disk_at_a_transaction_commit_is_a_typed_refusal_and_writes_nothing(tmp_path: Path) -> None:
    store = RecordStore(tmp_path / "records.db")
    store.write("k", {"n": 1}, mode=Overwrite())
    tx = store.begin("tx-full")
    tx.write("k", {"n": 2}, mode=Conditional(version=1))
    tx.connection = _FullAtCommit(tx.connection)  # type: ignore[assignment]
    with pytest.raises(ToolError) as exc:
        tx.commit()
    assert exc.value.error.category == "transient" and exc.value.error.vendor_code == "SQLITE_FULL"
    assert store.read("k").value == {"n": 1}  # type: ignore[union-attr]
    assert store.committed("tx-full") is False
