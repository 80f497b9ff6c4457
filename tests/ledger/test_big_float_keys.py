"""A number beyond 2**53 mints one key however it is spelled: the integer ``2**60`` and the float
``1.152921504606846976e18`` (the same JSON value, as a model may write it) are one action, so a
repeated proposal is replayed, not sent again."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import digest_json
from actionspace.ledger.keys import idempotency_key


def _key(arguments: Any) -> str:
    return idempotency_key("r1", "n1", "pay@1", arguments)


@pytest.mark.parametrize("n", [2**53 + 2, 2**60, -(2**62), 10**20, 2**70])
def test_an_integral_float_beyond_2_53_mints_the_key_of_its_integer(n: int) -> None:
    assert float(n) == n  # each is a float exactly
    assert _key({"account": float(n)}) == _key({"account": n})
    assert _key({"to": [float(n), "x"]}) == _key({"to": [n, "x"]})


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(2**80), max_value=2**80))
def test_a_float_and_an_integer_share_a_digest_exactly_when_they_are_equal(n: int) -> None:
    as_float = float(n)
    same = digest_json({"a": as_float}) == digest_json({"a": n})
    assert same == (as_float == n)


def test_digits_in_strings_do_not_change_a_key() -> None:
    assert _key({"memo": "12345678901234567890"}) != _key({"memo": 12345678901234567890})
    assert _key({"memo": "12345678901234567890"}) == _key({"memo": "12345678901234567890"})


def test_beside_an_integer_no_float_equals_a_float_and_its_integer_still_agree() -> None:
    odd = 2**60 + 7  # no float equals it: written as its exact digits
    assert _key({"a": odd, "b": 2.0**60}) == _key({"a": odd, "b": 2**60})
    assert _key({"a": odd}) != _key({"a": float(odd)})


def test_a_float_alone_keeps_its_rfc_8785_text() -> None:
    assert digest_json({"ratio": 1e21}) == b'{"ratio":1e+21}'
    assert digest_json({"ratio": 10**21}) == b'{"ratio":1e+21}'
