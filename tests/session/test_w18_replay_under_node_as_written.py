"""A write stored before node identity read NFC, replayed through its node as written, spends nothing.

Node ids and idempotency keys read the arguments' strings in NFC since the last release. A store
written before holds, for arguments not in NFC (``"Zoë"`` decomposed), an entry under the node
and the key of then: both over the arguments as written (its argument digest read NFC already).
A proposal of those arguments again in the same turn looks its node up as written and is
answered from that entry. The budget let it through as a replay only when it found the entry by
the key the proposal would mint now, which is another: the replay was charged as a new call,
and with the budget spent it was refused ``budget_exceeded`` instead of answered. Any replay is
free; this one too. And the entry's key stays the action's: a tool that takes its key and is
sent the action again (its entry ``failed`` retryably) is sent the key it was sent before, by
which it dedupes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Budget, Runtime
from actionspace._canonical import digest_json
from actionspace.errors import ActionError
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.keys import args_digest, idempotency_key
from actionspace.types import Observation
from tests.pg import STORES, store_url

_TEXTS = ("Zoë Café Ångström", "a\u0323\u0301")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _old_node(turn: int, tool_key: str, arguments: Any) -> str:
    """The node a runtime whose node identity read strings as written named the action."""
    return f"t{turn}/{tool_key}/{hashlib.sha256(digest_json(arguments)).hexdigest()[:16]}"


def _old_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """The key such a runtime minted: over the arguments as written."""
    return "as1_" + hashlib.sha256(digest_json([run_id, node_id, tool_key, arguments])).hexdigest()[:32]


def _stored_before(rt: Runtime, run: str, arguments: dict[str, Any], state: str) -> str:
    """An entry of turn 1's ``pay`` as such a runtime stored it (``committed``, or ``failed``
    ``transient``: sent again by the next proposal); its key."""
    node = _old_node(1, "pay@1", arguments)
    key = _old_key(run, node, "pay@1", arguments)
    assert key != idempotency_key(run, node, "pay@1", arguments)  # the key changed
    sent = LedgerEntry(
        key=key,
        run_id=run,
        node_id=node,
        tool="pay@1",
        args_digest=args_digest(arguments),
        arguments=arguments,
        state="dispatched",
        attempts=1,
    )
    assert rt.ledger.begin(sent).created
    if state == "committed":
        paid = Observation(call_id="before", tool="pay", tool_version="1", status="ok", data="paid before")
        settled = sent.evolve(state="committed", observation=paid.to_dict())
    else:
        error = ActionError.of("transient", "the bank did not answer in time; nothing was paid")
        settled = sent.evolve(state="failed", error=error.to_dict())
    assert rt.ledger.transition(key, ("dispatched",), settled) is not None
    return key


class _World:
    """A runtime with one call of budget per run; ``pay`` counts its sends and the keys it got."""

    def __init__(self, url: str) -> None:
        self.rt = Runtime(url, recover_on_start=False, budgets=[Budget(calls=1, per="run")])
        self.sent: list[tuple[str, str]] = []

        @self.rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
        def pay(to: str, cents: int, idempotency_key: str) -> str:
            """Pay someone."""
            self.sent.append((to, idempotency_key))
            return f"paid {to}"

        @self.rt.tool(effect="write", writes=["note:{text}"])
        def note(text: str) -> str:
            """Write a note."""
            return text


def _message(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


@pytest.mark.parametrize("driven", ["sync", "async"])
def test_a_replay_through_the_node_as_written_is_answered_when_the_budget_is_spent(
    store: str, driven: str
) -> None:
    world = _World(store)
    rt = world.rt
    try:
        for text in _TEXTS:
            run = f"conv-{uuid.uuid4().hex[:10]}"
            written = {"to": unicodedata.normalize("NFD", text), "cents": 500}
            _stored_before(rt, run, written, "committed")
            s = rt.session(run_id=run, provider="openai_chat")
            s.user("Pay Zoë, and note it")
            [noted] = s.handle(_message("n1", "note", {"text": "paid"})).observations
            assert noted.ok and rt.budget(run_id=run) == {"calls": 0}  # the run's budget is spent
            message = _message("again", "pay", written)
            turn = asyncio.run(s.ahandle(message)) if driven == "async" else s.handle(message)
            [again] = turn.observations
            assert again.ok, again.error
            assert again.diagnostics.get("replayed") is True and again.data == "paid before"
            assert world.sent == []  # answered from the entry stored before, never sent
            assert rt.budget(run_id=run) == {"calls": 0}
            assert [e.state for e in rt.ledger.list(limit=1000) if e.run_id == run].count("committed") == 2
    finally:
        rt.close()


def test_a_tool_sent_again_through_the_node_as_written_gets_the_key_it_was_sent_before(store: str) -> None:
    """The entry stored before failed retryably: the proposal sends the action again (charged, as
    any send), under the entry's own key, which the tool reads as it did the first time."""
    world = _World(store)
    rt = world.rt
    try:
        run = f"conv-{uuid.uuid4().hex[:10]}"
        written = {"to": unicodedata.normalize("NFD", _TEXTS[0]), "cents": 500}
        key = _stored_before(rt, run, written, "failed")
        s = rt.session(run_id=run, provider="openai_chat")
        s.user("Pay Zoë")
        [paid] = s.handle(_message("again", "pay", written)).observations
        assert paid.ok, paid.error
        assert world.sent == [(written["to"], key)]
        [entry] = [e for e in rt.ledger.list(limit=1000) if e.run_id == run]
        assert (entry.key, entry.state, entry.attempts) == (key, "committed", 2)
        assert rt.budget(run_id=run) == {"calls": 0}  # a send is charged
    finally:
        rt.close()


def _units_stored_before(
    rt: Runtime, run: str, items: list[dict[str, Any]], units: dict[str, list[int]]
) -> None:
    """A committed batch ``invite`` sent in parts, of turn 1, as such a runtime stored it: one entry
    per part (label → its items' positions), under ``<node>#<label>`` of the node its arguments
    named then, keyed over them as written."""
    node = _old_node(1, "invite@1", {"items": items})
    for label, indexes in units.items():
        unit = {"items": [items[i] for i in indexes]}
        unit_node = f"{node}#{label}"
        key = _old_key(run, unit_node, "invite@1", unit)
        sent = LedgerEntry(
            key=key,
            run_id=run,
            node_id=unit_node,
            tool="invite@1",
            args_digest=args_digest(unit),
            arguments=unit,
            state="dispatched",
            attempts=1,
        )
        assert rt.ledger.begin(sent).created
        done = Observation(
            call_id=f"before#{label}", tool="invite", tool_version="1", status="ok", data="sent"
        )
        assert rt.ledger.transition(
            key, ("dispatched",), sent.evolve(state="committed", observation=done.to_dict())
        )


_PARTS = {
    "per_item": {"0": [0], "1": [1], "2": [2]},
    "per_item_keyed": {"p0": [0], "p1": [1], "p2": [2]},
    "chunked": {"chunk0": [0, 1], "chunk1": [2]},
}


@pytest.mark.parametrize("driven", ["sync", "async"])
@pytest.mark.parametrize("parts", sorted(_PARTS))
def test_a_batch_sent_in_parts_stored_before_is_replayed_part_by_part_never_sent_again(
    store: str, driven: str, parts: str
) -> None:
    """A batch sent per item or in chunks keeps one entry per part, under the call's node and the
    part's label: the node as written must be found through them (the call's own node holds no
    entry), or every item of a batch committed before the upgrade is sent again when proposed
    again in its turn."""
    rt = Runtime(store, recover_on_start=False)
    invited: list[str] = []
    chunked = parts == "chunked"

    @rt.tool(
        effect="write",
        writes=["invite:"],
        batch="chunked" if chunked else "per_item",
        chunk_size=2 if chunked else None,
    )
    def invite(items: list[dict[str, Any]]) -> str:
        """Invite people."""
        invited.extend(i["name"] for i in items)
        return "sent"

    try:
        run = f"conv-{uuid.uuid4().hex[:10]}"
        names = [unicodedata.normalize("NFD", n) for n in ("Zoë", "Chloé", "Ana")]
        keyed = parts == "per_item_keyed"
        items = [{"id": f"p{i}", "name": n} if keyed else {"name": n} for i, n in enumerate(names)]
        _units_stored_before(rt, run, items, _PARTS[parts])
        s = rt.session(run_id=run, provider="openai_chat")
        s.user("Invite them")
        message = _message("again", "invite", {"items": items})
        turn = asyncio.run(s.ahandle(message)) if driven == "async" else s.handle(message)
        [again] = turn.observations
        assert again.ok, again.error
        assert invited == []  # each part answered from its entry stored before, never sent again
        assert [i.diagnostics.get("replayed") for i in again.items] == [True] * len(items)
        assert len([e for e in rt.ledger.list(limit=1000) if e.run_id == run]) == len(_PARTS[parts])
    finally:
        rt.close()
