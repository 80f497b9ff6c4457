"""A call the budget check lets through uncharged as a replay (its entry read ``unknown_commit``)
must not be sent when, before the ledger reads the entry, the timed-out attempt ends with a
retryable failure and the entry becomes ``failed`` (sendable again): the send would spend nothing.

The interleaving is forced: the late outcome of the attempt is held back until the budget check
has decided, and written before the ledger begins the call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Runtime
from actionspace.catalog.spec import RetryPolicy
from actionspace.ledger import late
from actionspace.ledger.entries import LedgerStore
from actionspace.pipeline import stages
from actionspace.types import Observation

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
WAIT_S = 10.0


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'window.db'}"


class Interleaving:
    """Holds the late outcome of a timed-out attempt until the budget check has read the entry,
    then lets it land before the call reaches the ledger."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.late_waiting = threading.Event()
        self.may_write = threading.Event()
        self.written = threading.Event()
        self.decisions: list[bool] = []
        write, decide = late._write, stages.replayed

        def held_write(*args: Any) -> None:
            self.late_waiting.set()
            self.may_write.wait(WAIT_S)
            try:
                write(*args)
            finally:
                self.written.set()

        def decide_then_land(ledger: LedgerStore, key: str) -> bool:
            exempt = decide(ledger, key)
            if self.armed:
                self.decisions.append(exempt)
                self.may_write.set()  # the attempt's thread ends here, between check and begin
                assert self.written.wait(WAIT_S)
            return exempt

        monkeypatch.setattr(late, "_write", held_write)
        monkeypatch.setattr(stages, "replayed", decide_then_land)


class SentUncharged(AssertionError):
    """The call was sent again while the budget check had let it through as a replay."""


def _call(rt: Runtime, caller: str) -> Observation:
    raw = {"name": "put", "arguments": {"x": 1}}
    if caller == "sync":
        return rt.call(raw, run_id="r", node_id="n1")
    return asyncio.run(asyncio.wait_for(rt.acall(raw, run_id="r", node_id="n1"), WAIT_S))


@pytest.mark.parametrize("caller", ["sync", "async"])
def test_a_replay_exemption_whose_entry_becomes_sendable_before_the_ledger_reads_it_is_not_sent_uncharged(
    monkeypatch: pytest.MonkeyPatch, store: str, caller: str
) -> None:
    window = Interleaving(monkeypatch)
    release = threading.Event()
    sent: list[int] = []

    def put(x: int) -> int:
        sent.append(x)
        if len(sent) == 1:
            release.wait(WAIT_S)
            raise ConnectionRefusedError("it never reached the service")
        return x

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
        release.set()
        assert window.late_waiting.wait(WAIT_S)  # the attempt ended; its outcome is not written yet
        entry = rt.ledger.get_node("r", "n1")
        assert entry is not None and entry.state == "unknown_commit"
        assert rt.meter is not None and rt.meter.used(run_id="r").calls == 1

        window.armed = True
        again = _call(rt, caller)

        assert window.decisions == [True]  # the budget check took it for a replay
        if sent != [1]:  # the budget of one call is spent: a second send must be refused
            calls = rt.meter.used(run_id="r").calls
            raise SentUncharged(f"sent {len(sent)} times, {calls} call charged: {again.to_dict()}")
        assert again.error is not None and again.error.category in ("budget_exceeded", "transient")
        assert rt.meter.used(run_id="r").calls == 1
