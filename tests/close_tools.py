"""Slow tools for the tests of closing a Runtime while calls or plans run (tests/test_w83_*,
tests/plan/test_w65_*): each tool counts its calls, says when it started, and would take
:data:`SLOW_S` if nothing stopped it."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from actionspace import Runtime

SLOW_S = 5.0
"""How long every tool would run if nothing stopped it."""


class Tools:
    """Tools that count their calls, say when ``started_after`` of them started, and take 5 s."""

    def __init__(self, started_after: int = 1) -> None:
        self.calls: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.started = threading.Event()
        self.started_after = started_after

    def begin(self, name: str) -> None:
        with self.lock:
            self.calls[name] += 1
            if sum(self.calls.values()) >= self.started_after:
                self.started.set()


def slow_runtime(url: str, tools: Tools) -> Runtime:
    """A Runtime on ``url`` with a read and a write on worker threads (``get``, ``put``) and
    their async twins (``aget``, ``aput``), each reporting to ``tools``."""
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", reads=["r:{x}"])
    def get(x: int) -> int:
        """Read x (on a worker thread)."""
        tools.begin("get")
        time.sleep(SLOW_S)
        return x

    @rt.tool(effect="write", writes=["w:{x}"])
    def put(x: int) -> int:
        """Write x (on a worker thread)."""
        tools.begin("put")
        time.sleep(SLOW_S)
        return x

    @rt.tool(effect="read", reads=["ar:{x}"])
    async def aget(x: int) -> int:
        """Read x."""
        tools.begin("aget")
        await asyncio.sleep(SLOW_S)
        return x

    @rt.tool(effect="write", writes=["aw:{x}"])
    async def aput(x: int) -> int:
        """Write x."""
        tools.begin("aput")
        await asyncio.sleep(SLOW_S)
        return x

    return rt


def write_entries(url: str, rt: Runtime) -> list[tuple[str, str, str | None]]:
    """The ledger's (node, state, error) rows, read from the file for SQLite (its Runtime closed)."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as db:
            return list(db.execute("select node_id, state, error from ledger_entries order by node_id"))
    return [(e.node_id, e.state, str(e.error)) for e in rt.ledger.list(limit=100)]


WAIT_S = 10.0


def in_frames(function: str) -> bool:
    """Some thread of this process is running ``function`` now."""
    for frame in list(sys._current_frames().values()):
        walk: Any = frame
        while walk is not None:
            if walk.f_code.co_name == function:
                return True
            walk = walk.f_back
    return False


def until(holds: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not holds():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.005)


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(work())
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def open_on(path: Path) -> list[str]:
    """This process's descriptors open on ``path`` or its WAL and shared-memory files."""
    names = {str(path), f"{path}-wal", f"{path}-shm"}
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target in names:
            found.append(target)
    return found
