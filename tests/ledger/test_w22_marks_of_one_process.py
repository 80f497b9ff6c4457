"""Two runtimes on one store in one process: each holds a mark (ledger/liveness.py), and a look
leaves out every mark of its own process. Whether a send of this process still runs is the
process's registry's to say (``in_flight_here``), which every settling consults: so a runtime whose
caller was cut mid-send (its entry left ``unknown``, nothing of it running any more) is no reason for
the other runtime to wait, at a proposal of the same action or at its start-up recovery (they used to
take each other for a live process: 30 s of waiting, then ``unknown_commit``; the entry left at
start). A send that still runs in the other runtime is never settled under it, nor sent again.
SQLite file and PostgreSQL schema alike.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import commit, liveness
from actionspace.ledger.status import Committed, NotCommitted
from tests.proc import url as url  # the fixture


def _pay(call_id: str) -> ToolCall:
    """The payment of 500 cents to bob, proposed as call ``call_id``."""
    return ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id=call_id)


_SCHEMA = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "cents": {"type": "integer"}},
    "required": ["to", "cents"],
}


@pytest.fixture(autouse=True)
def _quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commit, "MAX_WAIT_S", 1.0)  # a wait for a live holder ends soon: its answer matters
    monkeypatch.setattr(liveness, "PG_SETTLED_S", 0.0)  # a fresh session's look is trusted here


class _Service:
    """A payment service counting what it received (a file); ``hold`` makes a send wait for ``go``."""

    def __init__(self, outbox: Path) -> None:
        self.outbox = outbox
        self.entered = threading.Event()
        self.go = threading.Event()
        self.hold = False

    def received(self) -> int:
        return len(self.outbox.read_text().splitlines()) if self.outbox.exists() else 0

    def status(self, *, key: str, arguments: dict[str, Any]) -> Committed | NotCommitted:
        return Committed("paid") if self.received() else NotCommitted()

    def _write(self, to: str, cents: int) -> str:
        with self.outbox.open("a") as f:
            f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\n")
        return "paid"

    def add_async(self, rt: Runtime) -> None:
        async def pay(to: str, cents: int) -> str:
            self.entered.set()
            if self.hold:
                await asyncio.sleep(3600)  # cut by its caller's cancel before it sends anything
            return self._write(to, cents)

        self._add(rt, pay)

    def add_blocking(self, rt: Runtime) -> None:
        def pay(to: str, cents: int) -> str:
            self.entered.set()
            if self.hold:
                assert self.go.wait(60), "never released"
            return self._write(to, cents)

        self._add(rt, pay)

    def _add(self, rt: Runtime, fn: Callable[..., Any]) -> None:
        rt.add_tool(
            name="pay",
            fn=fn,
            effect="external",
            idempotency="query",
            status_query=self.status,
            timeout_s=60.0,
            input_schema=_SCHEMA,
        )
        rt.add_tool(
            name="look",
            fn=lambda who: who,
            effect="read",
            description="Look someone up.",
            input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
        )


@pytest.fixture
def pair(url: str) -> Iterator[tuple[Runtime, Runtime]]:
    first, second = Runtime(url, recover_on_start=False), Runtime(url)
    yield first, second
    second.close()
    first.close()


def _cut_mid_send(rt: Runtime, service: _Service) -> None:
    """``rt``'s call of the payment, its caller cancelled while the tool runs: the entry is left
    ``unknown`` and nothing of the send runs any more; ``rt`` stays open."""

    async def cut() -> None:
        task = asyncio.ensure_future(rt.acall(_pay("c1"), run_id="r", node_id="pay"))
        deadline = time.monotonic() + 60
        while not service.entered.is_set():
            assert time.monotonic() < deadline, "the tool never began"
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    service.hold = True
    asyncio.run(cut())
    service.hold = False
    assert [e.state for e in rt.ledger.list()] == ["unknown"]


def test_a_proposal_beside_the_other_runtimes_cut_send_settles_it_at_once(
    pair: tuple[Runtime, Runtime], tmp_path: Path
) -> None:
    first, second = pair
    service = _Service(tmp_path / "outbox.jsonl")
    service.add_async(first)
    service.add_async(second)
    _cut_mid_send(first, service)
    obs = second.call(_pay("c2"), run_id="r", node_id="pay")
    assert obs.ok, obs  # old: the other runtime taken for a live holder, unknown_commit after the wait
    assert service.received() == 1  # not received before the cut: sent once, after the status said so
    assert [e.state for e in second.ledger.list()] == ["committed"]


def test_the_start_up_recovery_beside_the_other_runtimes_cut_send_settles_it(
    pair: tuple[Runtime, Runtime], tmp_path: Path
) -> None:
    first, second = pair
    service = _Service(tmp_path / "outbox.jsonl")
    service.add_async(first)
    service.add_async(second)
    _cut_mid_send(first, service)
    assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok  # its start
    assert [e.state for e in second.ledger.list()] == ["accepted"]  # old: left unknown (a live holder)
    assert service.received() == 0  # recovery sends nothing


@pytest.mark.parametrize("where", ["proposal", "start"])
def test_a_send_still_running_in_the_other_runtime_is_never_settled_under_it(
    pair: tuple[Runtime, Runtime], tmp_path: Path, where: str
) -> None:
    """No false "dead": the other runtime's mark is left out, so its send is this process's
    registry's to tell, and it says the send runs."""
    first, second = pair
    service = _Service(tmp_path / "outbox.jsonl")
    service.add_blocking(first)
    service.add_blocking(second)
    service.hold = True
    answers: list[Any] = []
    sending = threading.Thread(
        target=lambda: answers.append(first.call(_pay("c1"), run_id="r", node_id="pay"))
    )
    sending.start()
    try:
        assert service.entered.wait(60)
        if where == "start":
            assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
        else:
            obs = second.call(_pay("c2"), run_id="r", node_id="pay")
            assert obs.error is not None and obs.error.category == "unknown_commit", obs
        assert [e.state for e in second.ledger.list()] == ["dispatched"]  # its holder's still
    finally:
        service.go.set()
        sending.join(60)
    assert answers and answers[0].ok, answers
    again = second.call(_pay("c3"), run_id="r", node_id="pay")
    assert again.ok and again.diagnostics.get("replayed") is True, again
    assert service.received() == 1


class _Store:
    """What a mark reads of a SQLite ledger store: its ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path


def test_a_store_collected_unreleased_lends_its_mark_to_no_store_that_takes_its_id(tmp_path: Path) -> None:
    """A runtime dropped without being closed leaves its mark (this process lives on); a store made
    later at the same address is not that store: unmarked, it cannot say "none alive" (old: the
    dropped store's mark answered for it, about another file, "none")."""
    for _ in range(50):  # other threads may take the freed address first: again, with a new one
        gone = _Store(tmp_path / "a.db")
        liveness.hold(gone, "", "sqlite")
        assert not liveness.others_alive(gone)
        address = id(gone)
        del gone
        made = [_Store(tmp_path / "elsewhere.db") for _ in range(2_000)]
        same = [store for store in made if id(store) == address]
        if same:
            break
    else:
        pytest.skip("no object was made at a collected store's address")
    assert liveness.others_alive(same[0])  # an unmarked store: nothing certain
