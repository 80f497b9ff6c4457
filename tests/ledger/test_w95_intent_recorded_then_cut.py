"""A durable call whose intent is in the file when a signal handler's ``Exception`` reaches it.

A signal handler runs in the main thread as a call begins or returns; the exception it raises may
be an ``Exception`` (an alarm's timeout error), which the intent's step takes for a failure of the
store. When it lands just after the transaction holding the intent committed (the ``COMMIT`` of a
group the call leads, or the one statement of a lone intent), the call answered "the ledger could
not record the intent", though its entry is on disk, ``dispatched``.

What must hold: the tool is not sent; the answer does not say nothing was recorded: it says the
call was interrupted after its intent was recorded, not sent, and that the next proposal of the
action settles it (``transient``, retry with the same key); and that next proposal does, never
sending the action twice.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.ledger.sqlite_writer import COMMIT, GroupCommit
from actionspace.types import Observation
from tests.ledger.waits import until

DEADLINE_S = 20.0
"""How long a wait for another thread's step may take before the test fails (far above the
milliseconds each takes; never reached unless a caller waits for ever)."""
SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}}


class Alarm(RuntimeError):
    """What the signal handler raises: an ``Exception``, as an alarm's timeout error is."""


def _until(condition: Callable[[], bool], what: str) -> None:
    until(condition, what, DEADLINE_S)


def _runtime(tmp_path: Path, idempotency: str, sent: Counter[str]) -> Runtime:
    def put(key: str, idempotency_key: str | None = None) -> str:
        sent[key] += 1
        return f"put {key}"

    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", idempotency=idempotency)
    return rt


class _CommitThenAlarm:
    """The writer's kept cursor: its ``COMMIT`` in ``leader``'s thread commits, then raises."""

    def __init__(self, cursor: sqlite3.Cursor, leader: Callable[[], threading.Thread | None]) -> None:
        self._cursor = cursor
        self._leader = leader
        self.armed = True

    def execute(self, sql: str, *args: Any) -> Any:
        result = self._cursor.execute(sql, *args)
        if sql == COMMIT and self.armed and threading.current_thread() is self._leader():
            self.armed = False
            raise Alarm("the handler ran as the COMMIT returned")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def _assert_recorded_not_sent(x: Any, store: Any, run: str) -> None:
    assert isinstance(x, Observation), x
    assert x.status == "error" and x.error is not None
    assert "could not record" not in x.error.message, x.error.message
    assert x.error.category == "transient"
    assert x.error.details.get("sent") is False
    assert "recorded" in x.error.message and "settles" in x.error.message, x.error.message
    entry = store.entries_of(run, ["x"])["x"]
    assert (entry.state, entry.attempts) == ("dispatched", 1)  # on disk, as the answer says
    assert x.error.details.get("idempotency_key") == entry.key


def _settled_by_next_proposal(rt: Runtime, run: str, idempotency: str, sent: Counter[str]) -> None:
    again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
    if idempotency == "native":  # asked again with the same key: it dedupes
        assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1)
    else:  # it cannot be asked: for a person, as after a crash, never sent blindly
        assert again.error is not None and again.error.category == "unknown_commit"
        assert sent["x"] == 0
    store: Any = rt.ledger
    assert store.entries_of(run, ["x"])["x"].state in ("committed", "unknown_commit")


@pytest.mark.parametrize("idempotency", ["none", "native"])
def test_an_alarm_just_after_the_intent_groups_commit_answers_recorded_not_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idempotency: str
) -> None:
    sent: Counter[str] = Counter()
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # no flush of deferred writes among them
    rt = _runtime(tmp_path, idempotency, sent)
    runs = {"x": rt.new_run(), "y": rt.new_run()}
    store: Any = rt.ledger
    writer: GroupCommit = store._group
    for name, warm in runs.items():  # each run's state written: the calls below write only their intents
        rt.call(ToolCall(name="put", arguments={"key": f"warm {name}"}), run_id=warm, node_id="warm")
    started, release = threading.Event(), threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(DEADLINE_S)  # both intents queue behind it and share the next group

    out: dict[str, Any] = {}

    def call(name: str) -> None:
        try:
            out[name] = rt.call(
                ToolCall(name="put", arguments={"key": name}), run_id=runs[name], node_id=name
            )
        except BaseException as exc:  # noted for the test to look at
            out[name] = exc

    holder = threading.Thread(target=lambda: writer.run(hold), daemon=True)
    holder.start()
    assert started.wait(DEADLINE_S)
    wal = writer._wal
    assert wal is not None
    threads: list[threading.Thread] = []
    cursor = _CommitThenAlarm(wal[2], lambda: threads[0] if threads else None)
    writer._wal = (wal[0], wal[1], cursor)  # type: ignore[assignment]
    threads.append(threading.Thread(target=call, args=("x",), daemon=True))  # leads the group
    threads[0].start()
    _until(lambda: writer._waiting == 1, "x's intent to queue")
    threads.append(threading.Thread(target=call, args=("y",), daemon=True))
    threads[1].start()
    _until(lambda: writer._waiting == 2, "y's intent to queue")
    release.set()
    for thread in (holder, *threads):
        thread.join(DEADLINE_S)
        assert not thread.is_alive(), "a caller still waits after the interruption"
    assert not cursor.armed
    y = out.get("y")
    assert isinstance(y, Observation) and (y.status, y.data) == ("ok", "put y"), y
    assert sent["x"] == 0  # never sent by the interrupted call
    _assert_recorded_not_sent(out.get("x"), store, runs["x"])
    _settled_by_next_proposal(rt, runs["x"], idempotency, sent)
    rt.close()


def _alarm_as_frame_returns(name: str) -> Callable[[FrameType, str, Any], Any]:
    """A trace function raising :class:`Alarm` once, as the first frame of function ``name`` returns."""
    fired = [False]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return" and not fired[0]:
            fired[0] = True
            sys.settrace(None)
            raise Alarm(f"the handler ran as {name} returned")
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        return local if event == "call" and frame.f_code.co_name == name and not fired[0] else None

    return tracer


@pytest.mark.parametrize("idempotency", ["none", "native"])
def test_an_alarm_just_after_a_lone_intents_statement_answers_recorded_not_sent(
    tmp_path: Path, idempotency: str
) -> None:
    """The usual intent: one statement in autocommit, nobody else writing; the handler lands as the
    operation that ran it returns (the row committed, its sync not made yet)."""
    sent: Counter[str] = Counter()
    rt = _runtime(tmp_path, idempotency, sent)
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "warm"}), run_id=run, node_id="warm")
    store: Any = rt.ledger
    sys.settrace(_alarm_as_frame_returns("insert_at_once"))
    try:
        x = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
    finally:
        sys.settrace(None)
    assert sent["x"] == 0
    _assert_recorded_not_sent(x, store, run)
    _settled_by_next_proposal(rt, run, idempotency, sent)
    rt.close()


def test_an_alarm_before_the_intents_statement_still_answers_nothing_recorded(tmp_path: Path) -> None:
    """The other side: the handler lands before the insert ran; nothing is on disk, and the answer
    says so (``transient``, nothing sent), the next proposal sending the action once."""
    sent: Counter[str] = Counter()
    rt = _runtime(tmp_path, "none", sent)
    run = rt.new_run()
    rt.call(ToolCall(name="put", arguments={"key": "warm"}), run_id=run, node_id="warm")
    store: Any = rt.ledger
    fired = [False]

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_name == "insert_at_once" and not fired[0]:
            fired[0] = True
            sys.settrace(None)
            raise Alarm("the handler ran as insert_at_once began")
        return None

    sys.settrace(tracer)
    try:
        x = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
    finally:
        sys.settrace(None)
    assert fired[0] and sent["x"] == 0
    assert x.error is not None and x.error.category == "transient", x
    assert x.error.details.get("sent") is False
    assert "x" not in store.entries_of(run, ["x"])
    again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
    assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1)
    rt.close()
