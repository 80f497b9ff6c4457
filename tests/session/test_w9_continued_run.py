"""A conversation continued after a restart (close, a new Runtime on the same store) and by a
second process (spawned, a fresh Runtime on the same SQLite file or PostgreSQL schema): the
approval filed in the first step, the run's budget, the user's words and the ledger carry over.
The payment the model re-proposes in the later step, re-ordered, ``500`` written ``500.0``, under
a new call id, is sent once; proposed again, it is answered from the ledger; a different payment
is sent. Each payment is counted in the tool's own SQLite table."""

from __future__ import annotations

import multiprocessing as mp
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Runtime
from tests.pg import fresh_schema
from tests.session.w47_world import _write, chat, sends

RUN = "conv-pay"


def payments_world(store: str, outbox: Path) -> Runtime:
    """``pay`` (external, no idempotency, needs an approval) and ``look`` (a read); at most four
    calls per run (a call held for approval is not one)."""
    rt = Runtime(store, recover_on_start=False, budgets=[Budget(calls=4, per="run")])

    @rt.tool(effect="external", idempotency="none", requires_approval=True, writes=["pay:{to}"])
    def pay(to: str, cents: int) -> dict[str, Any]:
        """Pay someone."""
        _write(outbox, to, str(cents))
        return {"paid": cents, "to": to}

    @rt.tool(effect="read")
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    return rt


def _first_step(store: str, outbox: Path) -> str:
    """The user asks, the model proposes the payment (held for approval) and one read."""
    rt = payments_world(store, outbox)
    s = rt.session(run_id=RUN, provider="openai_chat")
    s.user("pay bob 500 cents")
    (held,) = s.handle(chat(("c1", "pay", '{"to": "bob", "cents": 500}'))).observations
    assert held.error is not None and held.error.category == "needs_approval"
    (read,) = s.handle(chat(("c2", "look", '{"q": "bob"}'))).observations
    assert read.status == "ok"
    request_id = held.error.details["request_id"]
    assert isinstance(request_id, str)
    rt.close()
    return request_id


def _second_step(store: str, outbox: str, request_id: str, out: Any) -> None:
    """Another process: the person approves, the model re-proposes the payment rewritten, then
    proposes it again, a different payment and reads until the budget ends."""
    rt = payments_world(store, Path(outbox))
    seen: list[tuple[str, Any]] = [("turn", rt.session(run_id=RUN, provider="openai_chat").turn)]
    rt.approvals.approve(request_id, by="alice", reason="rent")
    s = rt.session(run_id=RUN, provider="openai_chat")
    for call_id, name, args in (
        ("c3", "pay", '{"cents": 500.0, "to": "bob"}'),
        ("c4", "pay", '{ "to" : "bob" , "cents" : 5e2 }'),
        ("c5", "pay", '{"to": "bob", "cents": 501}'),
        ("c6", "look", '{"q": "a"}'),
        ("c7", "look", '{"q": "b"}'),
        ("c8", "look", '{"q": "c"}'),
    ):
        (obs,) = s.handle(chat((call_id, name, args))).observations
        outcome = (
            obs.error.category if obs.error else ("replayed" if obs.diagnostics.get("replayed") else "ok")
        )
        seen.append((call_id, outcome))
    out.put(seen)
    rt.close()


def _in_process(store: str, outbox: Path, request_id: str) -> list[tuple[str, Any]]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_second_step, args=(store, str(outbox), request_id, out))
    proc.start()
    seen: list[tuple[str, Any]] = out.get(timeout=120)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    return seen


EXPECTED = [
    ("turn", 1),  # the user's turn carried over: the re-proposal is the same action
    ("c3", "ok"),  # approved in the other process: sent once
    ("c4", "replayed"),  # the same payment again: from the ledger
    ("c5", "needs_approval"),  # a different payment: a new action, its own approval
    ("c6", "ok"),  # charged so far: c2 (first process), c3, c6
    ("c7", "ok"),  # the fourth
    ("c8", "budget_exceeded"),  # a fifth: the first process's read counts
]


def _check(store: str, outbox: Path, seen: list[tuple[str, Any]]) -> None:
    assert seen == EXPECTED
    ((to, cents),) = sends(outbox)  # one payment, of the approved amount
    assert to == "bob" and float(cents) == 500
    rt = payments_world(store, outbox)  # a restart after both: the payment is still answered, not sent
    s = rt.session(run_id=RUN, provider="openai_chat")
    (again,) = s.handle(chat(("c9", "pay", '{"to": "bob", "cents": 500}'))).observations
    assert again.status == "ok" and again.diagnostics.get("replayed")
    assert again.data == {"paid": 500, "to": "bob"}
    (read,) = s.handle(chat(("c10", "look", '{"q": "d"}'))).observations
    assert read.error is not None and read.error.category == "budget_exceeded"
    assert len(sends(outbox)) == 1
    rt.close()


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_a_second_process_carries_the_approval_budget_turn_and_ledger_over_sqlite(tmp_path: Path) -> None:
    store, outbox = f"sqlite:///{tmp_path / 'rt.db'}", tmp_path / "outbox.db"
    request_id = _first_step(store, outbox)
    _check(store, outbox, _in_process(store, outbox, request_id))


def test_a_second_process_carries_the_approval_budget_turn_and_ledger_over_postgres(
    pg_schema_url: str, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.db"
    request_id = _first_step(pg_schema_url, outbox)
    _check(pg_schema_url, outbox, _in_process(pg_schema_url, outbox, request_id))


def test_a_restart_between_two_steps_carries_them_over(tmp_path: Path) -> None:
    store, outbox = f"sqlite:///{tmp_path / 'rt.db'}", tmp_path / "outbox.db"
    request_id = _first_step(store, outbox)
    got: queue.Queue[Any] = queue.Queue()
    _second_step(store, str(outbox), request_id, got)  # in this process, after the first closed
    _check(store, outbox, got.get(timeout=10))
