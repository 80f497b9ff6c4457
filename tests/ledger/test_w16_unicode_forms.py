"""A write whose answer was lost, proposed again in another Unicode normal form, is never sent again.

A model may write ``"café"`` composed (NFC, U+00E9) once and decomposed (NFD, ``e`` + U+0301) the
next time: one text, canonically. While the first proposal's outcome is not established, the
second is the identical action of DESIGN §11 and is answered ``unknown_commit`` unsent; it used to
be a new action (another digest, another key) and was sent again: a possible double payment. The
digest the ledger finds identical actions by reads strings up to canonical equivalence; arguments
already in NFC keep their digest and their key.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace._canonical import digest_json
from actionspace.ledger.keys import args_digest, idempotency_key
from tests.pg import STORES, store_url


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


_BASES = "aeiouncAEINOZ"
_MARKS = "\u0301\u0300\u0308\u0303\u0327\u030c\u0323"
"""Combining acute, grave, diaeresis, tilde, cedilla, caron, dot below: each composes with some
of the letters above, and two of them in another order is the same text or not (their classes)."""

texts = st.lists(
    st.tuples(st.sampled_from(_BASES), st.lists(st.sampled_from(_MARKS), max_size=3)),
    min_size=1,
    max_size=6,
).map(lambda parts: "".join(base + "".join(marks) for base, marks in parts))


def _forms(text: str) -> tuple[str, str]:
    return unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)


class _World:
    """A runtime whose ``pay`` loses its answer (``unknown_commit``); each send counted apart."""

    def __init__(self, url: str) -> None:
        self.rt = Runtime(url, recover_on_start=False)
        self.sent: list[str] = []
        self.lose = True

        @self.rt.tool(effect="external", idempotency="none", writes=["payee:{to}"])
        def pay(to: str, cents: int, memo: dict[str, str] | None = None) -> str:
            """Pay someone."""
            self.sent.append(to)
            if self.lose:
                raise TimeoutError("the bank did not answer")
            return "paid"

    def pay(self, run: str, call_id: str, arguments: dict[str, Any], node: str | None = None) -> Any:
        return self.rt.call(ToolCall(name="pay", arguments=arguments, id=call_id), run_id=run, node_id=node)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, decomposed_first=st.booleans(), in_key=st.booleans())
def test_a_lost_write_proposed_again_in_another_normal_form_is_never_sent_again(
    text: str, decomposed_first: bool, in_key: bool
) -> None:
    composed, decomposed = _forms(text)
    assume(composed != decomposed)
    first, again = (decomposed, composed) if decomposed_first else (composed, decomposed)
    world = _World("memory://")
    try:

        def arguments(form: str) -> dict[str, Any]:
            return {"to": "ana", "cents": 500, "memo": {form: "x"}} if in_key else {"to": form, "cents": 500}

        lost = world.pay("r", "c1", arguments(first))
        assert lost.error is not None and lost.error.category == "unknown_commit"
        assert len(world.sent) == 1
        answer = world.pay("r", "c2", arguments(again))
        assert answer.error is not None and answer.error.category == "unknown_commit", answer
        assert len(world.sent) == 1  # never sent again
        [entry] = world.rt.ledger.list(limit=10)  # the first proposal's: the other was never begun
        assert entry.state == "unknown_commit" and answer.error.details["idempotency_key"] == entry.key
    finally:
        world.rt.close()


@pytest.mark.parametrize("decomposed_first", [False, True])
def test_every_store_finds_the_identical_action_in_another_normal_form(
    store: str, decomposed_first: bool
) -> None:
    """The check the durable stores make in the insert's own transaction, and the memory store's
    (two nodes of the caller's: on the default path both forms are one node, one key)."""
    composed, decomposed = _forms("Zoë Café Ångström")
    first, again = (decomposed, composed) if decomposed_first else (composed, decomposed)
    world = _World(store)
    try:
        lost = world.pay("r", "c1", {"to": first, "cents": 500}, node="a")
        assert lost.error is not None and lost.error.category == "unknown_commit"
        answer = world.pay("r", "c2", {"to": again, "cents": 500}, node="b")
        assert world.sent == [first]  # never sent again
        assert answer.error is not None and answer.error.category == "unknown_commit", answer
        assert answer.error.details["state"] == "unknown_commit"
        other = world.pay("r", "c3", {"to": "Zoe Cafe Angstrom", "cents": 500})  # another text: sent
        assert other.error is not None and world.sent == [first, "Zoe Cafe Angstrom"]
        world.lose = False  # under a node of its own, the other form is the same action: replayed
        paid = world.pay("r2", "c4", {"to": first, "cents": 9}, node="pay")
        assert paid.ok, paid
        replayed = world.pay("r2", "c5", {"to": again, "cents": 9}, node="pay")
        assert replayed.ok and replayed.diagnostics.get("replayed") is True, replayed
        assert world.sent == [first, "Zoe Cafe Angstrom", first]
    finally:
        world.rt.close()


def _old_digest(arguments: Any) -> str:
    return hashlib.sha256(digest_json(arguments)).hexdigest()


json_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8
)
plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | json_text | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_text | texts, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(arguments=plain)
def test_arguments_in_nfc_keep_their_digest_and_key_and_other_forms_take_them(arguments: Any) -> None:
    composed = _nfc_deep(arguments)
    assert args_digest(composed) == _old_digest(composed)  # NFC arguments: the digest of before
    assert args_digest(arguments) == args_digest(composed)  # any other form: the NFC one's
    key = idempotency_key("r", "n", "pay@1", composed)  # NFC arguments: the key of before
    assert key == "as1_" + hashlib.sha256(digest_json(["r", "n", "pay@1", composed])).hexdigest()[:32]
    assert idempotency_key("r", "n", "pay@1", arguments) == key  # any other form: the NFC one's


def _nfc_deep(value: Any) -> Any:
    """``value`` with every string in NFC, but an object two of whose keys would become one,
    which stays as given (its keys and what it holds)."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_nfc_deep(v) for v in value]
    if isinstance(value, dict):
        out = {unicodedata.normalize("NFC", k): _nfc_deep(v) for k, v in value.items()}
        return value if len(out) != len(value) else out
    return value


def test_compatibility_forms_and_look_alikes_stay_other_actions() -> None:
    """Only canonical equivalence is one text: a ligature, a full-width letter, a Cyrillic look-alike
    and a precomposed letter with its mark dropped each name something else."""
    assert args_digest({"to": "\ufb01le"}) != args_digest({"to": "file"})
    assert args_digest({"to": "\uff21"}) != args_digest({"to": "A"})
    assert args_digest({"to": "\u0430"}) != args_digest({"to": "a"})
    assert args_digest({"to": "caf\u00e9"}) != args_digest({"to": "cafe"})
    assert args_digest({"to": "caf\u00e9"}) == args_digest({"to": "cafe\u0301"})
    both = {"caf\u00e9": 1, "cafe\u0301": 2}  # two keys, one text: neither is dropped
    assert args_digest(both) != args_digest({"caf\u00e9": 1})
    assert args_digest(both) != args_digest({"caf\u00e9": 2})
    nested = {"memo": both, "to": "cafe\u0301"}  # the rest of the arguments read as ever
    assert args_digest(nested) == args_digest({"memo": both, "to": "caf\u00e9"}) != args_digest(both)
