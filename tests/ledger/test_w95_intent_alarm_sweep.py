"""A durable call's intent interrupted by a signal handler's ``Exception`` at every call and return of
the store's code that writes it, one at a time.

The handler lands as a call begins or returns; its exception (an ``Exception``, as an alarm's
timeout error is) reaches the intent's step as a failure of the store would. Here it is raised at the
``n``-th such event inside the SQLite store's ``begin`` (the store, its writer, the connections'
code), for every ``n`` until the intent is written with none left. Whatever ``n``, for the user: the
tool is not sent by the interrupted call; the answer says nothing was recorded only when the ledger
holds no entry of the call, and says it was recorded only when it does; and proposing the action
again sends it exactly once (a ``native`` tool, asked again with the same key).
"""

from __future__ import annotations

import functools
import gc
import sys
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer
from actionspace.types import Observation

SRC = str(Path(sqlite_writer.__file__).parent.parent)
DEADLINE_S = 60.0
MOST = 400
"""More events than the intent's write runs: the sweep ends before (asserted)."""
SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}}


class Alarm(RuntimeError):
    """What the signal handler raises."""


def _alarm_at(nth: int, fired: list[bool]) -> Callable[[FrameType, str, Any], Any]:
    seen = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            return fire()
        return local

    def fire() -> Any:
        seen[0] += 1
        if seen[0] == nth:
            sys.settrace(None)
            fired[0] = True
            raise Alarm(f"at event {nth}")
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(SRC):
            return fire()
        return None

    return tracer


def _one(path: Path, nth: int) -> bool:
    """The intent of call ``x`` interrupted at its ``nth`` event; whether it was."""
    sent: Counter[str] = Counter()

    def put(key: str, idempotency_key: str | None = None) -> str:
        sent[key] += 1
        return f"put {key}"

    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    try:
        rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", idempotency="native")
        run = rt.new_run()
        rt.call(ToolCall(name="put", arguments={"key": "warm"}), run_id=run, node_id="warm")
        store: Any = rt.ledger
        fired = [False]

        def traced(begin: Callable[[Any], Any]) -> Callable[[Any], Any]:
            def traced_begin(entry: Any) -> Any:
                sys.settrace(_alarm_at(nth, fired))
                try:
                    return begin(entry)
                finally:
                    sys.settrace(None)

            return traced_begin

        store.begin = traced(store.begin)  # the intent's write, whichever the call takes
        store.begin_unless_pending = traced(store.begin_unless_pending)
        try:
            x = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        finally:
            del store.begin, store.begin_unless_pending
        assert isinstance(x, Observation)
        entry = store.entries_of(run, ["x"]).get("x")
        if not fired[0]:
            assert (x.status, sent["x"]) == ("ok", 1), x
            return False
        assert x.error is not None and x.error.category == "transient", (nth, x)
        assert sent["x"] == 0, f"at event {nth}: sent by the interrupted call"
        message = x.error.message
        if "not record" in message:  # "could not" / "did not": nothing of the call may be stored
            assert entry is None, f"at event {nth}: {message!r}, but the ledger holds {entry}"
        elif "was recorded" in message:
            assert entry is not None and entry.state == "dispatched", f"at event {nth}: {message!r}"
        else:
            assert "may have been recorded" in message, f"at event {nth}: {message!r}"
        again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1), f"at event {nth}: {again}"
        return True
    finally:
        rt.close()


def _within(nth: int, fn: Callable[[], bool]) -> bool:
    """``fn()`` on a thread of its own: a writer left held makes its later writes wait for ever,
    which fails the test (after :data:`DEADLINE_S`, far above the milliseconds a step takes)."""
    out: list[Any] = []

    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # raised here, in the test's thread
            out.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), f"at event {nth}: a write waits for ever (the writer was left held)"
    if isinstance(out[0], BaseException):
        raise out[0]
    return bool(out[0])


def test_an_alarm_at_any_event_of_the_intents_write_is_answered_truly(tmp_path: Path) -> None:
    fired = 0
    for nth in range(1, MOST):
        gc.collect()  # the runtimes of the steps before are closed here, not by a finalizer the
        gc.disable()  # collector would run in the traced call (its events counted there)
        try:
            if not _within(nth, functools.partial(_one, tmp_path / f"s{nth}.db", nth)):
                break
        finally:
            gc.enable()
        fired += 1
    else:
        raise AssertionError(f"the intent's write ran more than {MOST} events")
    assert fired > 5  # the sweep went through the write's steps, not only its first call
