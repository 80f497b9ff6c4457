"""``sources=`` vouches for a value only as its source wrote it: a model that re-cases a user's
sentence (or rounds a large number) writes information of its own, which carries the run's label."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from actionspace import Labels, Runtime
from actionspace.policy.flow import occurs

SECRET = "hunter2"
SENTENCE = "the quick brown fox jumps over the lazy dog"


def _encode(bits: str, text: str) -> str:
    """``text`` with its n-th letter upper-cased when the n-th bit is 1: a covert channel."""
    out, i = [], 0
    for ch in text:
        if ch.isalpha() and i < len(bits):
            out.append(ch.upper() if bits[i] == "1" else ch)
            i += 1
        else:
            out.append(ch)
    return "".join(out)


def test_a_value_recased_letter_by_letter_does_not_occur_in_its_source() -> None:
    assert not occurs("tHe QuIcK", [SENTENCE])
    assert not occurs("BoB", ["ask bob"])


def test_a_value_lowered_uppered_or_capitalized_whole_still_occurs() -> None:
    assert occurs("bob@x.com", ["send it to Bob@X.com please"])
    assert occurs("Bob", [{"name": "bob"}])
    assert occurs("BOB", ["ask bob"])
    assert occurs("The Quick Brown", [SENTENCE])
    assert occurs("the quick", [SENTENCE.upper()])


def test_a_large_integer_occurs_only_as_the_numeral_written() -> None:
    assert occurs(9007199254740993, ["account 9007199254740993"])
    assert not occurs(9007199254740992, ["account 9007199254740993"])
    assert not occurs(9007199254740994, ["account 9007199254740993"])
    assert occurs(100, ["pay 100.00 now"])
    assert occurs(12.5, ["12.5 EUR"])


@given(st.text(alphabet="01", min_size=4, max_size=30).filter(lambda b: "1" in b))
def test_no_casing_of_a_sentence_that_encodes_bits_occurs_in_it(bits: str) -> None:
    encoded = _encode(bits, SENTENCE)
    if encoded in (SENTENCE, SENTENCE.upper(), SENTENCE.capitalize(), SENTENCE.title()):
        return  # one of the few fixed spellings: no information beyond choosing it
    assert not occurs(encoded, [SENTENCE])


def _world() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://")
    sent: list[dict[str, Any]] = []

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return SECRET

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append({"recipient": recipient, "body": body})
        return "sent"

    return rt, sent


def test_a_secret_encoded_in_the_case_of_the_users_words_does_not_reach_a_sink() -> None:
    rt, sent = _world()
    run = rt.new_run()
    rt.user_input(run, f"Email bob@example.com this sentence: {SENTENCE}")
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).ok
    bits = "".join(format(b, "08b") for b in SECRET.encode())[:32]
    body = _encode(bits, SENTENCE)
    sources = {"recipient": ["user"], "body": ["user"]}
    call = {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": body}}
    blocked = rt.call(call, run_id=run, sources=sources)
    assert blocked.error is not None and blocked.error.category == "policy_violation", blocked
    assert sent == []
    plain = {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": SENTENCE}}
    assert rt.call(plain, run_id=run, sources=sources).ok
    assert sent == [{"recipient": "bob@example.com", "body": SENTENCE}]
