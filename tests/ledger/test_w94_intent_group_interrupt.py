"""Two durable calls whose intents share one group commit, its leader interrupted as the group's
``fdatasync`` returns.

The leader's thread runs the group's transaction for every caller in it; a signal handler landing
as its sync returns reached it after both intents were on disk. Each caller was told the
interruption: the other thread, never interrupted, had its call raise it (or, for a handler's
``Exception``, answer "the ledger could not record the intent", not sent) though its intent was in
the file, ``dispatched``.

What the user sees now: the other caller's call goes on and sends its tool once; the interrupted
caller's call raises the interruption, and calling that action again finds its entry and settles
it, never sending it twice (its tool was never sent: a ``native`` tool is sent once, with the same
key; one that cannot be asked ends ``unknown_commit`` for a person, as after a crash); no entry is
left ``dispatched``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import GroupCommit
from actionspace.types import Observation
from tests.ledger.waits import until

DEADLINE_S = 20.0
SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}}


class Interrupted(BaseException):
    """What a signal handler raises in the leader's thread (as Ctrl-C's ``KeyboardInterrupt``)."""


class Alarm(Exception):
    """What a signal handler may raise too: an ``Exception`` (an alarm's own timeout error)."""


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


@pytest.mark.parametrize("idempotency", ["none", "native"])
@pytest.mark.parametrize("interruption", [Interrupted, Alarm], ids=["base_exception", "exception"])
def test_an_interrupted_intent_group_answers_the_other_caller_and_sends_each_action_at_most_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idempotency: str, interruption: type[BaseException]
) -> None:
    sent: Counter[str] = Counter()

    def put(key: str, idempotency_key: str | None = None) -> str:
        sent[key] += 1
        return f"put {key}"

    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # no settle of the flusher queues among them
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", idempotency=idempotency)
    runs = {"x": rt.new_run(), "y": rt.new_run()}  # no lock of one run orders the two calls
    run = runs["x"]
    store: Any = rt.ledger
    writer: GroupCommit = store._group
    for name, warm in runs.items():  # each run's state written: the calls below write only their own
        rt.call(ToolCall(name="put", arguments={"key": f"warm {name}"}), run_id=warm, node_id="warm")
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(DEADLINE_S)  # both intents queue behind it, and share the next group

    out: dict[str, Any] = {}

    def call(name: str) -> None:
        try:
            call = ToolCall(name="put", arguments={"key": name})
            out[name] = rt.call(call, run_id=runs[name], node_id=name)
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc

    holder = threading.Thread(target=lambda: writer.run(hold), daemon=True)
    holder.start()
    assert started.wait(DEADLINE_S)
    leader = threading.Thread(target=call, args=("x",), daemon=True)
    leader.start()
    _until(lambda: writer._waiting == 1, "x's intent to queue")
    other = threading.Thread(target=call, args=("y",), daemon=True)
    other.start()
    _until(lambda: writer._waiting == 2, "y's intent to queue")
    fdatasync = os.fdatasync
    armed = [True]

    def sync_then_interrupt(fd: int) -> None:
        fdatasync(fd)
        if armed[0] and threading.current_thread() is leader:
            armed[0] = False
            raise interruption  # the handler runs as the sync returns: both intents are on disk

    monkeypatch.setattr(os, "fdatasync", sync_then_interrupt)
    release.set()
    for thread in (holder, leader, other):
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "a caller still waits after the interruption"
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    assert not armed[0]
    y = out.get("y")
    assert isinstance(y, Observation) and (y.status, y.data) == ("ok", "put y"), y  # never interrupted
    assert sent["y"] == 1
    x = out.get("x")
    assert sent["x"] == 0  # its caller was interrupted before it could send
    if isinstance(x, Observation):  # an Exception from the handler: told as the intent's failure
        assert x.status != "ok"
    else:
        assert isinstance(x, interruption)
    again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
    assert sent["x"] <= 1  # found and settled, never a second send
    if idempotency == "native":
        assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1)
    else:
        assert again.error is not None and again.error.category == "unknown_commit"
    replay = rt.call(ToolCall(name="put", arguments={"key": "y"}), run_id=runs["y"], node_id="y")
    assert (replay.status, replay.data, sent["y"]) == ("ok", "put y", 1)
    assert store.entries_of(runs["y"], ["y"])["y"].state == "committed"
    assert store.entries_of(run, ["x"])["x"].state in ("committed", "unknown_commit")  # not dispatched
    rt.close()
