"""An interruption that reaches a sync caller while its blocking write is handed to a worker thread.

A signal handler runs between two bytecodes of the main thread: a Ctrl-C can land once the attempt
was queued on the worker pool and before the caller holds its future, or while the caller waits
for it. The call then raises the interruption, as before; what it leaves behind must be what a
cancelled async caller leaves. An attempt no worker began is withdrawn: the tool is never called,
and the entry ends ``failed``, not sent, so the same action proposed again sends it once. An
attempt a worker began runs on (Python cannot stop it), and its outcome is written when it ends:
the same action proposed again replays it, instead of the entry staying ``unknown`` while the tool
committed unseen. The interruption is made to land at those steps: the pool's ``submit`` queues
the attempt, then raises; or the future it hands back raises from its wait.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.commit import still_running
from actionspace.ledger.entries import LedgerEntry

RUN, NODE = "cut-run", "n1"
RAW = {"name": "book", "arguments": {"seat": "12A"}}


def _wait_until(predicate: Callable[[], bool], limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never came")
        time.sleep(0.002)


class Booking:
    """A booking service whose send blocks until the test releases it."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.sends = 0

    def book(self, seat: str) -> dict[str, str]:
        self.sends += 1
        self.started.set()
        self.release.wait(30)
        return {"seat": seat, "booking": "B-1"}


@pytest.fixture(params=["memory", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def booking() -> Iterator[Booking]:
    service = Booking()
    yield service
    service.release.set()


def _runtime(url: str, service: Booking) -> Runtime:
    rt = Runtime(url, recover_on_start=False, max_threads=1)
    rt.add_tool(
        name="book",
        input_schema={
            "type": "object",
            "properties": {"seat": {"type": "string"}},
            "required": ["seat"],
            "additionalProperties": False,
        },
        fn=service.book,
        effect="write",
        timeout_s=10,
    )
    return rt


def _entry(rt: Runtime) -> LedgerEntry:
    entry = rt.ledger.get_node(RUN, NODE)
    assert entry is not None
    return entry


def _occupy_the_worker(rt: Runtime) -> threading.Event:
    """The pool's one worker thread busy until the answer is set: a new attempt waits in its queue."""
    freed, busy = threading.Event(), threading.Event()

    def hold() -> None:
        busy.set()
        freed.wait(30)

    rt.engine.executor._pool.submit(hold)
    assert busy.wait(5)
    return freed


def _drained(rt: Runtime) -> None:
    """Every attempt queued before now was taken by the (one) worker thread and ended."""
    rt.engine.executor._pool.submit(lambda: None).result(10)


def _interrupt(monkeypatch: pytest.MonkeyPatch, rt: Runtime, *, at: str, once: threading.Event) -> None:
    """The next attempt handed to the pool is interrupted: ``at="handover"`` once ``submit`` queued
    it, ``at="wait"`` when the caller waits for it, after ``once`` is set."""
    pool = rt.engine.executor._pool
    submit = pool.submit
    armed = [True]

    def submitted_then_interrupted(fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut = submit(fn, *args, **kwargs)
        if not armed[0]:
            return fut
        armed[0] = False
        if at == "handover":
            raise KeyboardInterrupt

        def interrupted_wait(timeout: float | None = None) -> Any:
            assert once.wait(5)
            del fut.result  # the future's own again, for whoever reads it later
            raise KeyboardInterrupt

        fut.result = interrupted_wait  # type: ignore[method-assign]
        return fut

    monkeypatch.setattr(pool, "submit", submitted_then_interrupted)


@pytest.mark.parametrize("at", ["handover", "wait"])
def test_an_interrupted_write_no_worker_began_is_never_sent_and_goes_once_when_asked_again(
    monkeypatch: pytest.MonkeyPatch, store_url: str, booking: Booking, at: str
) -> None:
    rt = _runtime(store_url, booking)
    with rt:
        freed = _occupy_the_worker(rt)
        queued = threading.Event()
        queued.set()
        _interrupt(monkeypatch, rt, at=at, once=queued)
        with pytest.raises(KeyboardInterrupt):
            rt.call(RAW, run_id=RUN, node_id=NODE)
        monkeypatch.undo()
        booking.release.set()
        freed.set()
        _drained(rt)
        assert booking.sends == 0  # not sent behind the caller's back once a worker was free
        _wait_until(lambda: _entry(rt).state == "failed")
        assert (_entry(rt).error or {}).get("details", {}).get("sent") is False
        again = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert again.status == "ok", again.error
        assert again.data == {"seat": "12A", "booking": "B-1"}
    assert booking.sends == 1


def test_an_interrupted_write_a_worker_began_is_recorded_when_it_ends_and_replayed(
    monkeypatch: pytest.MonkeyPatch, store_url: str, booking: Booking
) -> None:
    rt = _runtime(store_url, booking)
    with rt:
        _interrupt(monkeypatch, rt, at="wait", once=booking.started)
        with pytest.raises(KeyboardInterrupt):
            rt.call(RAW, run_id=RUN, node_id=NODE)
        monkeypatch.undo()
        assert still_running(_entry(rt).key)  # nothing asks its status or sends it again meanwhile
        booking.release.set()
        _wait_until(lambda: _entry(rt).state == "committed" and not still_running(_entry(rt).key))
        again = rt.call(RAW, run_id=RUN, node_id=NODE)
        assert again.status == "ok", again.error
        assert again.data == {"seat": "12A", "booking": "B-1"}
    assert booking.sends == 1


def test_a_tools_own_keyboard_interrupt_still_reaches_its_sync_caller(store_url: str) -> None:
    rt = Runtime(store_url, recover_on_start=False)

    def exits(seat: str) -> str:
        raise KeyboardInterrupt

    rt.add_tool(
        name="book",
        input_schema={"type": "object", "properties": {"seat": {"type": "string"}}},
        fn=exits,
        effect="write",
    )
    with rt:
        with pytest.raises(KeyboardInterrupt):
            rt.call(RAW, run_id=RUN, node_id=NODE)
        assert _entry(rt).state == "unknown"  # it ran: it may have acted, as before


def test_a_real_ctrl_c_during_the_wait_leaves_the_write_recorded_when_it_ends(
    store_url: str, booking: Booking
) -> None:
    """The same, with SIGINT sent to the main thread while it waits for the tool's worker thread."""
    assert threading.current_thread() is threading.main_thread()  # signals reach the main thread
    rt = _runtime(store_url, booking)

    def interrupt() -> None:
        if booking.started.wait(5):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with rt:
            threading.Thread(target=interrupt, daemon=True).start()
            with pytest.raises(KeyboardInterrupt):
                rt.call(RAW, run_id=RUN, node_id=NODE)
                time.sleep(5)  # the handler runs between two bytecodes of this thread
            signal.signal(signal.SIGINT, before)
            assert still_running(_entry(rt).key)
            booking.release.set()
            _wait_until(lambda: _entry(rt).state == "committed" and not still_running(_entry(rt).key))
            again = rt.call(RAW, run_id=RUN, node_id=NODE)
            assert again.status == "ok", again.error
    finally:
        signal.signal(signal.SIGINT, before)
    assert booking.sends == 1
