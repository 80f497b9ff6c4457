"""Idempotency keys of arguments that hold an integer beyond RFC 8785's domain (a 64-bit account id):
the same JSON value mints the same key however a number is spelled, and two different values never
share one (DESIGN §6: a shared key is a lost payment, a split one a double payment)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace._canonical import digest_json
from actionspace.ledger.keys import args_digest, idempotency_key

BIG = 2**60 + 7
"""An account id beyond 2**53."""


def _key(arguments: Any) -> str:
    return idempotency_key("r1", "n1", "pay@1", arguments)


def test_a_float_spelled_as_an_integer_mints_the_key_of_that_integer_beside_a_64_bit_id() -> None:
    assert _key({"account": BIG, "amount": 1.0}) == _key({"account": BIG, "amount": 1})
    assert _key({"account": BIG, "amount": 2.5e-7}) == _key({"account": BIG, "amount": 0.00000025})
    assert _key({"account": 5, "amount": 1.0}) == _key({"account": 5, "amount": 1})  # as RFC 8785 has it


@pytest.mark.parametrize(
    ("odd", "plain"),
    [
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (b"ab", "ab"),
        ({1, 2}, [1, 2]),
        (2**20000, "<int of 20001 bits>"),
    ],
    ids=["nan", "inf", "-inf", "bytes", "set", "int-of-20001-bits"],
)
def test_a_value_json_cannot_hold_beside_a_64_bit_id_is_refused_not_merged_with_a_string(
    odd: Any, plain: Any
) -> None:
    with pytest.raises(ValueError):
        args_digest({"account": BIG, "memo": odd})
    with pytest.raises(ValueError):
        _key({"account": BIG, "memo": odd})
    assert _key({"account": BIG, "memo": plain})  # the plain value itself has a key


def test_keys_beside_a_64_bit_id_follow_rfc_8785_key_order_and_string_escapes() -> None:
    # UTF-16 order puts U+FF61 after U+1F600 (a surrogate pair starts with 0xD8..): RFC 8785 §3.2.3
    assert _key({"\U0001f600": 1, "\uff61": 2, "id": BIG}) == _key({"id": BIG, "\uff61": 2, "\U0001f600": 1})
    text = digest_json({"\uff61": 1, "\U0001f600": 2, "id": BIG, "s": "a\u2028\x00"})
    assert (
        text
        == b'x{"id":1152921504606846983,"s":"a\xe2\x80\xa8\\u0000","\xf0\x9f\x98\x80":2,"\xef\xbd\xa1":1}'
    )


JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"]), max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES)
def test_the_digested_text_of_any_json_value_reads_back_as_that_value(value: Any) -> None:
    """No two different values share a digest: each digest's text decodes to exactly its value."""
    raw = digest_json({"id": BIG, "v": value})
    assert raw.startswith(b"x")
    assert json.loads(raw[1:]) == {"id": BIG, "v": value}


def test_a_payment_to_a_64_bit_account_repeated_as_1_instead_of_1_0_is_replayed_not_paid_twice() -> None:
    sent: list[tuple[int, float]] = []

    def pay(account: int, amount: float) -> dict[str, bool]:
        sent.append((account, amount))
        return {"ok": True}

    schema = {
        "type": "object",
        "properties": {"account": {"type": "integer"}, "amount": {"type": "number"}},
        "required": ["account", "amount"],
    }
    rt = Runtime()
    try:
        rt.add_tool(name="pay", input_schema=schema, fn=pay, effect="external", risk="low")
        first = rt.call(ToolCall(name="pay", arguments={"account": BIG, "amount": 1.0}, id="c1"), run_id="r")
        again = rt.call(ToolCall(name="pay", arguments={"account": BIG, "amount": 1}, id="c2"), run_id="r")
    finally:
        rt.close()
    assert first.status == "ok" and again.status == "ok"
    assert again.diagnostics.get("replayed") is True
    assert sent == [(BIG, 1.0)]
