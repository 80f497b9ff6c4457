"""Two processes continuing one conversation at the same time (two workers behind a load balancer)
see each other's turns, offers and labels before their next call, and neither loses the other's
saved state.

Each worker is a spawned process driven step by step through a queue, so an interleaving is
exact; the tools count what they really sent in a file, whatever the runtimes believe.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_schema

PASSWORD = "hunter2-correct-horse"


def _message(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _worker(store: str, outbox: str, inbox: Any, answers: Any) -> None:
    from actionspace import Labels, Runtime

    rt = Runtime(store, recover_on_start=False)

    def sent(what: dict[str, Any]) -> None:
        with open(outbox, "a") as f:
            f.write(json.dumps(what) + "\n")

    @rt.tool(effect="external", idempotency="none")
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        sent({"pay": to, "cents": cents})
        return "paid"

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent({"email": recipient, "body": body})
        return "sent"

    @rt.tool(effect="read")
    def look(who: str) -> str:
        """Look someone up."""
        return who

    session = rt.session(run_id="conv-1", provider="openai_chat")
    while True:
        step = inbox.get(timeout=120)
        if step is None:
            break
        what, args = step
        if what == "user":
            session.user(args)
            answers.put(session.turn)
        elif what == "offer":
            rt.offer(args, run_id="conv-1")
            answers.put(None)
        else:
            obs = session.handle(_message(*args)).observations[0]
            answers.put(obs.status if obs.error is None else obs.error.category)
    rt.close()


class Worker:
    """One process continuing the run; :meth:`do` runs a step there and returns its answer."""

    def __init__(self, store: str, outbox: Path) -> None:
        ctx = mp.get_context("spawn")
        self.inbox, self.answers = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(target=_worker, args=(store, str(outbox), self.inbox, self.answers))
        self.proc.start()

    def do(self, what: str, args: Any) -> Any:
        self.inbox.put((what, args))
        return self.answers.get(timeout=120)

    def stop(self) -> None:
        self.inbox.put(None)
        self.proc.join(timeout=60)
        assert self.proc.exitcode == 0


def _sent(outbox: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in outbox.read_text().splitlines()] if outbox.exists() else []


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _stores(tmp_path: Path, request: pytest.FixtureRequest, kind: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'run.db'}"
    return str(request.getfixturevalue("pg_schema_url"))


STORES = ["sqlite", "postgres"]


@pytest.mark.parametrize("kind", STORES)
def test_two_workers_taking_turns_never_share_a_turn_so_each_users_payment_is_sent(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    store, outbox = _stores(tmp_path, request, kind), tmp_path / "sent.jsonl"
    a, b = Worker(store, outbox), Worker(store, outbox)
    try:
        assert a.do("call", ("c0", "look", {"who": "bob"})) == "ok"  # both hold the run now
        assert b.do("call", ("c1", "look", {"who": "bob"})) == "ok"
        first = a.do("user", "Pay Bob 5 dollars")
        assert a.do("call", ("c2", "pay", {"to": "bob", "cents": 500})) == "ok"
        second = b.do("user", "Pay Bob another 5 dollars")
        assert second != first
        assert b.do("call", ("c3", "pay", {"to": "bob", "cents": 500})) == "ok"
        assert a.do("call", ("c4", "pay", {"to": "bob", "cents": 500})) == "ok"  # turn `second`: replayed
    finally:
        a.stop()
        b.stop()
    assert [s for s in _sent(outbox) if "pay" in s] == [{"pay": "bob", "cents": 500}] * 2


@pytest.mark.parametrize("kind", STORES)
def test_a_secret_read_by_one_worker_blocks_the_send_in_the_other(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    store, outbox = _stores(tmp_path, request, kind), tmp_path / "sent.jsonl"
    a, b = Worker(store, outbox), Worker(store, outbox)
    try:
        a.do("user", "Check my password")
        assert b.do("call", ("c0", "look", {"who": "bob"})) == "ok"
        assert a.do("call", ("c1", "read_password", {})) == "ok"
        email = {"recipient": "eve@example.com", "body": PASSWORD}
        assert b.do("call", ("c2", "send_email", email)) == "policy_violation"
    finally:
        a.stop()
        b.stop()
    assert _sent(outbox) == []


@pytest.mark.parametrize("kind", STORES)
def test_an_offer_made_by_one_worker_holds_in_the_other_before_its_next_call(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    store, outbox = _stores(tmp_path, request, kind), tmp_path / "sent.jsonl"
    a, b = Worker(store, outbox), Worker(store, outbox)
    try:
        b.do("offer", ["pay", "look"])
        a.do("offer", ["look"])
        assert b.do("call", ("c1", "pay", {"to": "bob", "cents": 1})) == "unknown_tool"
        assert b.do("call", ("c2", "look", {"who": "bob"})) == "ok"
    finally:
        a.stop()
        b.stop()
    assert _sent(outbox) == []


@pytest.mark.parametrize("kind", STORES)
def test_neither_worker_loses_what_the_other_saved(
    tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    store, outbox = _stores(tmp_path, request, kind), tmp_path / "sent.jsonl"
    a, b = Worker(store, outbox), Worker(store, outbox)
    try:
        a.do("offer", ["read_password", "send_email", "look", "pay"])
        b.do("offer", ["read_password", "send_email", "look", "pay"])
        assert a.do("call", ("c1", "read_password", {})) == "ok"  # A saves the secret label
        b.do("offer", ["send_email", "look"])  # B saves its offer over the state it holds
    finally:
        a.stop()
        b.stop()
    c = Worker(store, outbox)  # a third worker continues the run from the store alone
    try:
        email = {"recipient": "eve@example.com", "body": PASSWORD}
        assert c.do("call", ("c2", "send_email", email)) == "policy_violation"
        assert c.do("call", ("c3", "pay", {"to": "bob", "cents": 1})) == "unknown_tool"
    finally:
        c.stop()
    assert _sent(outbox) == []
