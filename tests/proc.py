"""Real second processes on one store, for the tests of a run continued across processes (DESIGN §11).

``url`` is the store two processes share, once a SQLite file and once a schema of its own in the
session's PostgreSQL cluster (import it into a test module as ``from tests.proc import url as url``).
A child is a Python script run by this interpreter (the venv's) with arguments; it talks back on
its standard output, one line per step, and a test waits on those lines (or a child on a file the
test creates: :data:`WAIT_FOR`), never on time. A child that never says what it was expected to
fails the test after a generous deadline, with the end of its standard error.
"""

from __future__ import annotations

import json
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.pg import fresh_schema

__all__ = [
    "BESIDE",
    "DEADLINE_S",
    "PAY_ONCE",
    "PAY_TOOLS",
    "WAIT_FOR",
    "Ahead",
    "Child",
    "RunStateRows",
    "add_script_tools",
    "at_once",
    "run_child",
    "run_killed",
    "sent",
    "url",
]

DEADLINE_S = 120.0
"""How long a test waits for a child's step before failing: far beyond any machine's slowness."""

WAIT_FOR = """
def wait_for(path, deadline_s=120):
    "Wait until the test creates ``path`` (a step of the test, not of the clock)."
    import os, time
    deadline = time.monotonic() + deadline_s
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "never released: " + path
        time.sleep(0.002)
"""
"""Script text defining ``wait_for(path)`` in a child: it blocks until the test touches ``path``."""


PAY_TOOLS = (
    WAIT_FOR
    + """
import json, os
from pathlib import Path
from actionspace.ledger.status import Committed, NotCommitted

def add_pay_tools(rt, outbox, before=None, look=True, pid=True, **pay_options):
    # pay: a payment service; it writes each payment to outbox, and its status query reads that file.
    # look: a read. before(attempt) runs first in each attempt, numbered from 1: what the test makes the
    # service do (block, refuse). pid: each payment names the process that sent it.
    attempts = []

    def pay(to: str, cents: int) -> str:
        attempts.append(1)
        if before is not None:
            before(len(attempts))
        with open(outbox, "a") as f:
            payment = {"to": to, "cents": cents, **({"pid": os.getpid()} if pid else {})}
            f.write(json.dumps(payment) + "\\n")
        return "paid"

    def paid(*, key, arguments):
        lines = Path(outbox).read_text().splitlines() if os.path.exists(outbox) else []
        return Committed("paid") if lines else NotCommitted()

    rt.add_tool(
        name="pay", fn=pay, effect="external", idempotency="query", status_query=paid,
        input_schema={"type": "object", "properties": {"to": {"type": "string"},
                      "cents": {"type": "integer"}}, "required": ["to", "cents"]},
        **pay_options,
    )
    if look:
        rt.add_tool(
            name="look", fn=lambda who: who, effect="read", description="Look someone up.",
            input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
        )
"""
)
"""Script text defining ``add_pay_tools(rt, outbox, ...)`` (and :data:`WAIT_FOR`): a payment tool whose
sends a test counts (:func:`sent`), for a script that defines ``add_tools(rt, outbox, release)`` on it."""

PAY_ONCE = """
import json, sys
from actionspace import Runtime, ToolCall
url, outbox, release = sys.argv[1:4]
rt = Runtime(url, recover_on_start=False)
add_tools(rt, outbox, release)
pay = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c1")
obs = rt.call(pay, run_id="r", node_id="pay")
rt.close()
print(json.dumps({"status": obs.status, "error": obs.error.category if obs.error else None}), flush=True)
"""
"""A child's script after its tools' (arguments: store URL, outbox, release file): one payment of 500
cents to bob (run ``r``, node ``pay``); it prints the payment's status and error category."""


BESIDE = (
    WAIT_FOR
    + """
import sys
from actionspace import Runtime
url, release = sys.argv[1:3]
rt = Runtime(url, recover_on_start=False)
print("ready", flush=True)
wait_for(release)
rt.close()
print("{}", flush=True)
"""
)
"""A child that keeps a runtime open on the store (arguments: store URL, release file) until the
test creates the release file: a live process beside the others, which sends nothing."""


class Ahead:
    """A clock (as ``Runtime(clock=...)`` and ``ledger/commit.py``'s ``time`` read it): the system's,
    its wall time ``ahead_s`` later, its monotonic time the system's. A process with it starts that long
    after another's step, by its own clock."""

    def __init__(self, ahead_s: float) -> None:
        self.ahead_s = ahead_s

    def time(self) -> float:
        return time.time() + self.ahead_s

    def monotonic(self) -> float:
        return time.monotonic()


def add_script_tools(rt: Any, script: str, *args: Any, **kwargs: Any) -> None:
    """Run ``script``'s ``add_tools(rt, *args, **kwargs)`` here: the very tools a child has."""
    scope: dict[str, Any] = {}
    exec(script, scope)
    scope["add_tools"](rt, *args, **kwargs)


def sent(outbox: Path) -> list[dict[str, Any]]:
    """The payments :data:`PAY_TOOLS`' ``pay`` wrote to ``outbox``, in order."""
    return [json.loads(line) for line in outbox.read_text().splitlines()] if outbox.exists() else []


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a store two processes share: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'run.db'}"
        return
    yield from fresh_schema(request.getfixturevalue("pg_url"))


def run_child(script: str, *args: str, deadline_s: float = DEADLINE_S) -> dict[str, Any]:
    """Run ``script`` with ``args`` (its ``sys.argv[1:]``) to its end; the JSON object its last line
    of output prints. Fails the test when the child fails."""
    with Child(script, *args) as child:
        return child.result(deadline_s)


def run_killed(script: str, *args: str, deadline_s: float = DEADLINE_S) -> str:
    """Run ``script`` that kills itself (SIGKILL); what it printed before, stripped."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=deadline_s, check=False
    )
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    return done.stdout.strip()


class Child:
    """``script`` running in another process, its output read line by line as it comes."""

    def __init__(self, script: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", script, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(self.proc.stdout, self._lines.put), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stderr, self._err.append), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: Any, put: Callable[[Any], None]) -> None:
        for line in stream:
            put(line.rstrip("\n"))
        put(None)

    def stderr(self) -> str:
        return "\n".join(line for line in self._err if line is not None)[-3000:]

    def line(self, deadline_s: float = DEADLINE_S) -> str:
        """The child's next line of output (fails the test when it ends first)."""
        try:
            line = self._lines.get(timeout=deadline_s)
        except queue.Empty:
            pytest.fail(f"the child said nothing for {deadline_s} s; its stderr:\n{self.stderr()}")
        if line is None:
            self.proc.wait(timeout=deadline_s)
            pytest.fail(f"the child ended ({self.proc.returncode}) early; its stderr:\n{self.stderr()}")
        return line

    def expect(self, said: str, deadline_s: float = DEADLINE_S) -> None:
        """Wait until the child's next line is ``said``."""
        line = self.line(deadline_s)
        assert line == said, f"{line!r} instead of {said!r}; stderr:\n{self.stderr()}"

    def finish(self, deadline_s: float = DEADLINE_S) -> list[str]:
        """Wait for the child's end; the lines it printed not read yet. Fails unless it exited 0."""
        self.proc.wait(timeout=deadline_s)
        for reader in self._readers:
            reader.join(deadline_s)
        lines: list[str] = []
        while not self._lines.empty() and (line := self._lines.get_nowait()) is not None:
            lines.append(line)
        assert self.proc.returncode == 0, f"exit {self.proc.returncode}; stderr:\n{self.stderr()}"
        return lines

    def result(self, deadline_s: float = DEADLINE_S) -> dict[str, Any]:
        """The JSON object the child printed last, once it ended well."""
        lines = self.finish(deadline_s)
        assert lines, f"the child printed nothing; stderr:\n{self.stderr()}"
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def at_once(script: str, argss: Sequence[Sequence[str]], go: Path) -> list[dict[str, Any]]:
    """Start ``script`` once per argument list; once each said ``ready``, create ``go`` (which
    each waits for, :data:`WAIT_FOR`) so their next steps overlap as far as the machine lets them.
    What each printed last (a JSON object), in the order of ``argss``."""
    children = [Child(script, *args) for args in argss]
    try:
        for child in children:
            child.expect("ready")
        go.touch()
        return [child.result() for child in children]
    finally:
        go.touch()
        for child in children:
            child.__exit__()


class RunStateRows:
    """The run-state table of the store at ``url``, read and written as another writer would."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None

    def get(self, run: str) -> str:
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                return str(conn.execute("SELECT state FROM run_state WHERE run_id = ?", (run,)).fetchone()[0])
        with psycopg.connect(self.url) as pg:
            row = pg.execute("SELECT state FROM actionspace_run_state WHERE run_id = %s", (run,)).fetchone()
            assert row is not None
            return str(row[0])

    def put(self, run: str, text: str) -> None:
        if self.path is not None:
            with sqlite3.connect(self.path) as conn:
                conn.execute("UPDATE run_state SET state = ? WHERE run_id = ?", (text, run))
            return
        with psycopg.connect(self.url) as pg:
            pg.execute("UPDATE actionspace_run_state SET state = %s WHERE run_id = %s", (text, run))

    def change(self, run: str, damage: Callable[[str], str]) -> str:
        """Rewrite ``run``'s row with ``damage`` of it; the text written."""
        text = damage(self.get(run))
        self.put(run, text)
        return text
