"""A write whose first attempt is refused (transient, retried) and whose retry then outlives its
timeout: while that retry still runs it may yet commit, so a status query's truthful "not
committed" must not send the write again. The call ends ``ok`` with the one commit's data (the
late answer came in time) or ``unknown_commit``, and the still-running attempt settles the entry
when it ends. Driven by events the test sets after observing the timeout, never by sleeps."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import RetryPolicy, Runtime, ToolCall
from actionspace.execution.deadlines import on_their_own
from actionspace.ledger.late import still_running
from actionspace.ledger.status import Committed, NotCommitted
from actionspace.types import Observation

TIMEOUT_S = 0.2
LIMIT_S = 30.0
"""How long anything here waits for a condition: far beyond any machine's slowness."""
PAID = "paid 500"


def _wait_until(predicate: Callable[[], bool], limit_s: float = LIMIT_S) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, "the condition never came"
        time.sleep(0.002)


class Service:
    """A payment service restarting at the first attempt (refused: nothing sent); the second
    attempt hangs in it until ``release`` is set; later ones answer at once. ``payments``: what
    it committed (a ``native`` service dedupes its key); ``sends``: attempts that reached it."""

    def __init__(self, idempotency: str) -> None:
        self.idempotency = idempotency
        self.attempts = 0
        self.sends = 0
        self.payments: list[str] = []
        self.release = threading.Event()
        self.later = threading.Event()  # an attempt after the hanging one began
        self.hung_ended = threading.Event()
        self._lock = threading.Lock()

    def begin(self) -> int:
        with self._lock:
            self.attempts += 1
            attempt = self.attempts
        if attempt == 1:
            raise ConnectionRefusedError("the payment service is restarting")
        with self._lock:
            self.sends += 1
        if attempt > 2:
            self.later.set()
        return attempt

    def commit(self, key: str) -> str:
        with self._lock:
            if not (self.idempotency == "native" and key in self.payments):
                self.payments.append(key)
        return PAID

    def status(self, *, key: str, arguments: dict[str, Any]) -> Any:
        with self._lock:
            return Committed(PAID) if key in self.payments else NotCommitted()


def _runtime(service: Service, url: str, *, is_async: bool) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    def pay(cents: int, idempotency_key: str) -> str:
        if service.begin() == 2:
            try:
                service.release.wait(LIMIT_S)
            finally:
                service.hung_ended.set()
        return service.commit(idempotency_key)

    async def apay(cents: int, idempotency_key: str) -> str:
        if service.begin() == 2:
            deadline = time.monotonic() + LIMIT_S
            try:
                while not service.release.is_set() and time.monotonic() < deadline:
                    with contextlib.suppress(asyncio.CancelledError):  # it goes on, as a service would
                        await asyncio.sleep(0.005)
            finally:
                service.hung_ended.set()
        return service.commit(idempotency_key)

    rt.add_tool(
        name="pay",
        fn=apay if is_async else pay,
        effect="external",
        idempotency=service.idempotency,
        status_query=service.status if service.idempotency == "query" else None,
        input_schema={"type": "object", "properties": {"cents": {"type": "integer"}}, "required": ["cents"]},
        timeout_s=TIMEOUT_S,
        retry=RetryPolicy(max_attempts=20, deadline_s=300.0, initial_backoff_s=0.001),
    )
    return rt


def _timed_out(rt: Runtime, is_async: bool, base: int) -> Callable[[], bool]:
    """Whether the hanging attempt's timeout came: its thread (or task) now runs on its own."""
    if is_async:
        return lambda: on_their_own() > base
    return lambda: rt.engine.executor.abandoned >= 1


def _pay(
    rt: Runtime, *, async_caller: bool, call_id: str = "c1", ended: threading.Event | None = None
) -> Observation:
    """The payment, from a sync or an async caller; ``ended`` is set as soon as the call returns
    (an async caller's loop then still waits, at its close, for a tool that went on on its own)."""
    call = ToolCall(name="pay", arguments={"cents": 500}, id=call_id)
    if async_caller:

        async def paid() -> Observation:
            try:
                return await rt.acall(call, run_id="r", node_id="pay")
            finally:
                if ended is not None:
                    ended.set()

        return asyncio.run(paid())
    try:
        return rt.call(call, run_id="r", node_id="pay")
    finally:
        if ended is not None:
            ended.set()


def _check(rt: Runtime, service: Service, obs: Observation, *, async_caller: bool) -> None:
    """At most one commit (one send for a tool that does not dedupe), an honest answer, and the
    entry settled by the attempt that ran on once it ended."""
    _wait_until(lambda: service.hung_ended.is_set() or service.attempts < 2)
    (entry,) = rt.ledger.list()
    _wait_until(lambda: not still_running(entry.key))
    assert len(service.payments) <= 1, service.payments
    if service.idempotency != "native":
        assert service.sends <= 1, (service.sends, obs)
    if obs.ok:
        assert obs.data == PAID and len(service.payments) == 1, obs
    else:
        assert obs.error is not None and obs.error.category == "unknown_commit", obs.error
    if service.payments:  # it committed: the ledger says so once the late attempt ended
        _wait_until(lambda: getattr(rt.ledger.get(entry.key), "state", None) == "committed")
        again = _pay(rt, async_caller=async_caller, call_id="c2")
        assert again.ok and again.data == PAID, again
        assert len(service.payments) == 1


def test_a_retry_that_outlives_its_timeout_is_not_sent_again_beside_it(tmp_path: Path) -> None:
    """The reproduction: the refused first attempt is retried, the retry hangs past its timeout,
    and the test releases it only after the call ended: one payment, never two."""
    service = Service("query")
    rt = _runtime(service, f"sqlite:///{tmp_path / 'a.db'}", is_async=False)
    try:
        obs = _pay(rt, async_caller=False)
        service.release.set()
        _check(rt, service, obs, async_caller=False)
        assert service.attempts == 2  # the refused one and the one that ran on: nothing sent beside it
        assert obs.error is not None and "still runs" in obs.error.message
    finally:
        service.release.set()
        rt.close(wait=True)


@pytest.mark.parametrize("async_tool", [False, True], ids=["blocking_tool", "async_tool"])
@pytest.mark.parametrize("async_caller", [False, True], ids=["sync_caller", "async_caller"])
def test_a_retry_left_running_is_sent_once_from_every_caller(
    tmp_path: Path, async_caller: bool, async_tool: bool
) -> None:
    """The same with a sync or an async caller, and a blocking tool or an async one that goes on
    past its timeout's cancel: released once the call ended, it is still the only send."""
    service = Service("query")
    rt = _runtime(service, f"sqlite:///{tmp_path / 'a.db'}", is_async=async_tool)
    ended = threading.Event()

    def release_once_ended() -> None:
        ended.wait(LIMIT_S)
        service.release.set()

    thread = threading.Thread(target=release_once_ended, daemon=True)
    thread.start()
    try:
        obs = _pay(rt, async_caller=async_caller, ended=ended)
        _check(rt, service, obs, async_caller=async_caller)
        assert service.attempts == 2
        assert obs.error is not None and obs.error.category == "unknown_commit"
    finally:
        service.release.set()
        rt.close(wait=True)


RELEASES = ("before_the_timeout", "after_the_timeout", "after_a_next_attempt_began", "after_the_call")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    async_caller=st.booleans(),
    async_tool=st.booleans(),
    idempotency=st.sampled_from(["query", "native", "none"]),
    release=st.sampled_from(RELEASES),
)
def test_a_write_retried_beside_its_running_attempt_commits_at_most_once(
    async_caller: bool, async_tool: bool, idempotency: str, release: str
) -> None:
    service = Service(idempotency)
    rt = _runtime(service, "memory://", is_async=async_tool)
    base = on_their_own()
    ended = threading.Event()
    if release == "before_the_timeout":
        service.release.set()
    waits: dict[str, Callable[[], bool]] = {
        "after_the_timeout": _timed_out(rt, async_tool, base),
        "after_a_next_attempt_began": service.later.is_set,
        "after_the_call": lambda: False,  # only once the call returned
    }

    def releaser() -> None:
        wait = waits.get(release)
        if wait is not None:
            _wait_until(lambda: wait() or ended.is_set())
            service.release.set()

    thread = threading.Thread(target=releaser, daemon=True)
    thread.start()
    try:
        obs = _pay(rt, async_caller=async_caller, ended=ended)
        thread.join(LIMIT_S)
        service.release.set()
        _check(rt, service, obs, async_caller=async_caller)
    finally:
        ended.set()
        service.release.set()
        rt.close(wait=True)
