"""A call the ledger answers from its record without sending (``committed``, ``unknown_commit``,
``failed`` for good) is its replay, and a replay spends nothing: it is answered even when the
budget left could not pay for a new call. A call the ledger would send again (``failed``
retryable) is admitted and charged as any send, so a spent budget still refuses it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Runtime
from actionspace.catalog.spec import RetryPolicy
from actionspace.types import Observation

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'replay.db'}"


def _runtime(store: str, fn: Callable[..., Any], budget: Budget) -> Runtime:
    rt = Runtime(store, recover_on_start=False, budgets=budget)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=fn, effect="write", retry=RetryPolicy(max_attempts=1))
    return rt


def _call(rt: Runtime, caller: str, node: str | None = "n1") -> Observation:
    raw = {"name": "put", "arguments": {"x": 1}}
    if caller == "sync":
        return rt.call(raw, run_id="r", node_id=node)
    return asyncio.run(asyncio.wait_for(rt.acall(raw, run_id="r", node_id=node), 10))


@pytest.mark.parametrize("node", ["n1", None], ids=["given_node", "identity_node"])
@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_committed_write_called_again_is_replayed_within_a_spent_budget(
    store: str, caller: str, node: str | None
) -> None:
    sent: list[int] = []

    def put(x: int) -> int:
        sent.append(x)
        return x * 10

    with _runtime(store, put, Budget(calls=1)) as rt:
        first = _call(rt, caller, node)
        again = _call(rt, caller, node)
        assert first.ok and first.data == 10
        assert again.ok and again.data == 10, again.error
        assert again.diagnostics.get("replayed") is True
        assert sent == [1]
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1
        other = rt.call({"name": "put", "arguments": {"x": 2}}, run_id="r", node_id="n2")
        assert other.error is not None and other.error.category == "budget_exceeded"
        assert sent == [1]


@pytest.mark.parametrize(
    ("raised", "category"),
    [(ValueError("bad account"), "unclassified"), (ConnectionError("reset"), "unknown_commit")],
    ids=["failed_for_good", "unknown_commit"],
)
@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_settled_failure_called_again_is_replayed_within_a_spent_budget(
    store: str, caller: str, raised: Exception, category: str
) -> None:
    sent: list[int] = []

    def put(x: int) -> int:
        sent.append(x)
        raise raised

    with _runtime(store, put, Budget(calls=1)) as rt:
        first = _call(rt, caller)
        again = _call(rt, caller)
        assert first.error is not None and first.error.category == category, first.error
        assert again.error is not None and again.error.category == category, again.error
        assert sent == [1]
        entry = rt.ledger.get_node("r", "n1")
        assert entry is not None and entry.state in ("failed", "unknown_commit")


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_retryable_failure_sent_again_is_still_admitted_and_charged(store: str, caller: str) -> None:
    sent: list[int] = []

    def put(x: int) -> int:
        sent.append(x)
        raise ConnectionRefusedError("the service is restarting")

    with _runtime(store, put, Budget(calls=1)) as rt:
        first = _call(rt, caller)
        assert first.error is not None and first.error.category == "transient", first.error
        again = _call(rt, caller)
        assert again.error is not None and again.error.category == "budget_exceeded", again.error
        assert sent == [1]


def test_a_retryable_failure_sent_again_within_budget_is_charged_again(store: str) -> None:
    outcomes: list[Any] = [ConnectionRefusedError("restarting"), 7]

    def put(x: int) -> int:
        got = outcomes.pop(0)
        if isinstance(got, Exception):
            raise got
        return int(got)

    with _runtime(store, put, Budget(calls=2)) as rt:
        assert _call(rt, "sync").error is not None
        again = _call(rt, "sync")
        assert again.ok and again.data == 7 and not again.diagnostics.get("replayed")
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 2
        third = _call(rt, "sync")  # now committed: replayed, nothing more charged
        assert third.ok and third.diagnostics.get("replayed") is True
        assert rt.meter.used(run_id="r").calls == 2


def test_an_unknown_commit_whose_attempt_still_runs_is_charged_as_a_send(store: str) -> None:
    release = threading.Event()
    ended = threading.Event()
    sent: list[int] = []

    def put(x: int) -> int:
        sent.append(x)
        try:
            release.wait(10)
            raise ConnectionRefusedError("it never reached the service")
        finally:
            ended.set()

    rt = Runtime(store, recover_on_start=False, budgets=Budget(calls=1))
    rt.add_tool(
        name="put",
        input_schema=SCHEMA,
        fn=put,
        effect="write",
        timeout_s=0.2,
        retry=RetryPolicy(max_attempts=1),
    )
    with rt:
        first = _call(rt, "sync")
        assert first.error is not None and first.error.category == "unknown_commit", first.error
        while_running = _call(rt, "sync")  # its late answer may yet make it sendable: not a replay
        assert while_running.error is not None
        assert while_running.error.category == "budget_exceeded", while_running.error
        release.set()
        assert ended.wait(10)
        for _ in range(2000):  # the late failure is written by the attempt's own callback
            entry = rt.ledger.get_node("r", "n1")
            if entry is not None and entry.state == "failed":
                break
            ended.wait(0.01)
        again = _call(rt, "sync")  # now failed retryable: a send, refused by the spent budget
        assert again.error is not None and again.error.category == "budget_exceeded", again.error
        assert sent == [1]
