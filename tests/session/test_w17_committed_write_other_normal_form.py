"""A committed write proposed again in the same turn in another Unicode normal form is replayed.

A model may write ``"café"`` composed (NFC, U+00E9) and, re-encoding its own text, decomposed
(NFD, ``e`` + U+0301) the next time: one text, canonically. On the default session path a
proposal's node is (turn, tool@version, canonical arguments, occurrence), and a committed
identical action in the same turn is answered from the ledger, never sent again (DESIGN §11). The
node id and the idempotency key used to read strings as written, so the other form was a new node
and the write was sent a second time (a double payment). Arguments already in NFC keep the node id
and the key they always had.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import textwrap
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace._canonical import digest_json
from actionspace.ledger.keys import idempotency_key
from actionspace.pipeline import identity_node
from actionspace.session import Session
from tests.pg import STORES, store_url
from tests.proc import run_child
from tests.proc import url as url  # the fixture

_BASES = "aeiouncAEINOZ"
_MARKS = "\u0301\u0300\u0308\u0303\u0327\u030c\u0323"
"""Combining acute, grave, diaeresis, tilde, cedilla, caron, dot below: each composes with some of
the letters above, and two of them in another order is the same text or not (their classes)."""

texts = st.lists(
    st.tuples(st.sampled_from(_BASES), st.lists(st.sampled_from(_MARKS), max_size=3)),
    min_size=1,
    max_size=6,
).map(lambda parts: "".join(base + "".join(marks) for base, marks in parts))


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _forms(text: str) -> tuple[str, str]:
    return unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)


def _message(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "pay", "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


class _World:
    """A runtime whose ``pay`` commits (no status query, no key of its own: the ledger alone keeps
    it from being sent twice); each send counted."""

    def __init__(self, url: str) -> None:
        self.rt = Runtime(url, recover_on_start=False)
        self.sent: list[dict[str, Any]] = []

        @self.rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
        def pay(to: str, cents: int, memo: dict[str, str] | None = None) -> str:
            """Pay someone."""
            self.sent.append({"to": to, "memo": memo})
            return f"paid {to}"

    def session(self) -> Session:
        s = self.rt.session(run_id=f"conv-{uuid.uuid4().hex[:10]}", provider="openai_chat")
        s.user("Pay the café 5 euros")
        return s


def _arguments(form: str, in_key: bool) -> dict[str, Any]:
    return {"to": "ana", "cents": 500, "memo": {form: "x"}} if in_key else {"to": form, "cents": 500}


def _committed_then_other_form(world: _World, text: str, decomposed_first: bool, in_key: bool) -> None:
    composed, decomposed = _forms(text)
    first, again = (decomposed, composed) if decomposed_first else (composed, decomposed)
    s = world.session()
    before = len(world.sent)
    [paid] = s.handle(_message("call_1", _arguments(first, in_key))).observations
    assert paid.ok, paid
    assert len(world.sent) == before + 1
    [replayed] = s.handle(_message("call_2", _arguments(again, in_key))).observations
    assert replayed.ok, replayed
    assert replayed.diagnostics.get("replayed") is True, replayed.diagnostics
    assert len(world.sent) == before + 1  # answered from the ledger, never sent again
    entries = [e for e in world.rt.ledger.list(limit=100) if e.run_id == s.run_id]
    assert len(entries) == 1 and entries[0].state == "committed"  # one node, one entry
    s.user("Pay it once more")  # a new turn: a new action, sent
    [new] = s.handle(_message("call_3", _arguments(again, in_key))).observations
    assert new.ok and new.diagnostics.get("replayed") is not True, new
    assert len(world.sent) == before + 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, decomposed_first=st.booleans(), in_key=st.booleans())
def test_a_committed_write_proposed_again_in_another_normal_form_is_replayed_in_memory(
    text: str, decomposed_first: bool, in_key: bool
) -> None:
    assume(_forms(text)[0] != _forms(text)[1])
    world = _World("memory://")
    try:
        _committed_then_other_form(world, text, decomposed_first, in_key)
    finally:
        world.rt.close()


def test_every_store_replays_a_committed_write_proposed_in_another_normal_form(store: str) -> None:
    """Over one runtime on each store, each example a run of its own."""
    world = _World(store)
    try:

        @settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )
        @given(text=texts, decomposed_first=st.booleans(), in_key=st.booleans())
        def check(text: str, decomposed_first: bool, in_key: bool) -> None:
            assume(_forms(text)[0] != _forms(text)[1])
            _committed_then_other_form(world, text, decomposed_first, in_key)

        check()
    finally:
        world.rt.close()


def _old_node(turn: int, tool_key: str, arguments: Any, occurrence: int = 1) -> str:
    digest = hashlib.sha256(digest_json(arguments)).hexdigest()[:16]
    return f"t{turn}/{tool_key}/{digest}" + (f"/{occurrence}" if occurrence > 1 else "")


def _old_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    return "as1_" + hashlib.sha256(digest_json([run_id, node_id, tool_key, arguments])).hexdigest()[:32]


json_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | json_text | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text | texts, inner, max_size=3),
    max_leaves=8,
)


def _nfc_deep(value: Any) -> Any:
    """``value`` with every string in NFC, but an object two of whose keys would become one."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_nfc_deep(v) for v in value]
    if isinstance(value, dict):
        out = {unicodedata.normalize("NFC", k): _nfc_deep(v) for k, v in value.items()}
        return value if len(out) != len(value) else out
    return value


@settings(max_examples=300, deadline=None)
@given(arguments=plain, turn=st.integers(0, 50), occurrence=st.integers(1, 3))
def test_arguments_in_nfc_keep_their_node_and_key_and_any_other_form_takes_them(
    arguments: Any, turn: int, occurrence: int
) -> None:
    composed = _nfc_deep(arguments)
    node = identity_node(turn, "pay@1", composed, occurrence)
    assert node == _old_node(turn, "pay@1", composed, occurrence)  # NFC arguments: as before
    assert idempotency_key("r", node, "pay@1", composed) == _old_key("r", node, "pay@1", composed)
    assert identity_node(turn, "pay@1", arguments, occurrence) == node  # any form: the NFC one's
    assert idempotency_key("r", node, "pay@1", arguments) == idempotency_key("r", node, "pay@1", composed)


_CONTINUE = textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime

    url, run, outbox, to, call_id, user = sys.argv[1:7]
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
    def pay(to: str, cents: int) -> str:
        "Pay someone."
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to}) + "\\n")
        return "paid " + to

    s = rt.session(run_id=run, provider="openai_chat")
    if user == "user":  # the first process; the second continues the run in the same turn
        s.user("Pay Zoë")
    call = {"id": call_id, "type": "function",
            "function": {"name": "pay", "arguments": json.dumps({"to": to, "cents": 500})}}
    [obs] = s.handle({"role": "assistant", "content": None, "tool_calls": [call]}).observations
    turn = s.turn
    rt.close()
    print(json.dumps({"ok": obs.ok, "replayed": obs.diagnostics.get("replayed") is True,
                      "turn": turn, "data": obs.data}))
    """
)


@pytest.mark.parametrize("decomposed_first", [False, True])
def test_a_second_process_continuing_the_run_replays_the_other_normal_form(
    url: str, tmp_path: Path, decomposed_first: bool
) -> None:
    composed, decomposed = _forms("Zoë Café Ångström")
    first, again = (decomposed, composed) if decomposed_first else (composed, decomposed)
    outbox = tmp_path / "outbox.jsonl"
    run = "conv-continued"
    one = run_child(_CONTINUE, url, run, str(outbox), first, "c1", "user")
    assert one == {"ok": True, "replayed": False, "turn": 1, "data": f"paid {first}"}
    two = run_child(_CONTINUE, url, run, str(outbox), again, "c2", "-")
    assert two["ok"] and two["replayed"] and two["turn"] == 1, two
    assert [json.loads(line)["to"] for line in outbox.read_text().splitlines()] == [first]  # sent once


def _stored_before(world: _World, run: str, arguments: dict[str, Any]) -> None:
    """A committed ``pay`` of turn 1 as a runtime whose node identity read strings as written stored
    it: under the node those arguments named then."""
    node = _old_node(1, "pay@1", arguments)
    paid = world.rt.call({"name": "pay", "arguments": arguments, "id": "before"}, run_id=run, node_id=node)
    assert paid.ok, paid
    assert world.rt.ledger.get_node(run, node) is not None


@pytest.mark.parametrize("driven", ["sync", "async"])
def test_an_entry_stored_under_the_node_as_written_before_is_still_that_action(
    store: str, driven: str
) -> None:
    """Entries stored before node identity read NFC keep their node: the same arguments (not in
    NFC) proposed again in the same turn are replayed from it, never sent again, on every store and
    with the gates on a worker thread (async); a new turn is a new action."""
    world = _World(store)
    try:
        for text in ("Zoë Café Ångström", "a\u0323\u0301"):
            s = world.session()
            written = {"to": unicodedata.normalize("NFD", text), "cents": 500, "memo": None}  # as validated
            _stored_before(world, s.run_id, written)
            assert len(world.sent) == 1
            message = _message("again", written)
            turn = asyncio.run(s.ahandle(message)) if driven == "async" else s.handle(message)
            [again] = turn.observations
            assert again.ok and again.diagnostics.get("replayed") is True, again
            assert len(world.sent) == 1  # answered from the entry stored before, never sent again
            world.sent.clear()
            s.user("Pay it once more")  # a new turn: a new action, sent
            [new] = s.handle(_message("later", written)).observations
            assert new.ok and new.diagnostics.get("replayed") is not True, new
            assert len(world.sent) == 1
            world.sent.clear()
    finally:
        world.rt.close()
