"""Keys and argument digests are a contract (DESIGN §7): the fast encoder is RFC 8785 exactly."""

from __future__ import annotations

import enum
import hashlib
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.ledger.keys import args_digest, canonical_json, idempotency_key


class _Colour(enum.StrEnum):
    RED = "red"


class _Size(enum.IntEnum):
    BIG = 7


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


_texts = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _texts
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lists = st.lists(inner, max_size=4) | st.tuples(inner, inner)
    return lists | st.dictionaries(_texts, inner, max_size=4)


_values = st.recursive(_scalars, _containers, max_leaves=12)


def _reference(value: Any) -> bytes | type[BaseException]:
    try:
        return rfc8785.dumps(value)
    except Exception as exc:
        return type(exc)


def _ours(value: Any) -> bytes | type[BaseException]:
    try:
        return canonical_json(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(_values)
def test_canonical_json_is_rfc8785_byte_for_byte_or_fails_alike(value: Any) -> None:
    assert _ours(value) == _reference(value)


@pytest.mark.parametrize(
    "value",
    [
        {"b": 1, "a": [True, None, "x"]},
        {"ctl": '\x00\x01\x1f\x7f\b\f\n\r\t"\\', "uni": "é\u2028\U0001f600"},
        {"é": 1, "e": 2, "\U0001f600": 3, "\uffff": 4},  # non-ASCII keys: UTF-16 order
        {"n": 2**53 - 1, "m": -(2**53) + 1},
        {"big": 2**53},  # beyond the safe integers: rejected as rfc8785 rejects it
        {"f": 1.0, "g": 1e21, "h": -0.0},
        {"surrogate": "\ud800"},
        {1: "non-string key"},
        ("a", "tuple"),
        _nested(70),
        {"enum": _Colour.RED, "flag": _Size.BIG},
    ],
)
def test_corner_cases_match_rfc8785(value: Any) -> None:
    assert _ours(value) == _reference(value)


def test_keys_and_digests_stay_the_ones_minted_before() -> None:
    args: dict[str, Any] = {"value": 3, "key": "k1", "tags": ["a", "é"], "meta": {"z": None}}
    canonical = rfc8785.dumps(["run-1", "n1", "put@1", args])
    assert idempotency_key("run-1", "n1", "put@1", args) == (
        "as1_" + hashlib.sha256(canonical).hexdigest()[:32]
    )
    assert args_digest(args) == hashlib.sha256(rfc8785.dumps(args)).hexdigest()
    assert (
        idempotency_key("r", "n", "t@1", {"a": 1})
        == "as1_" + hashlib.sha256(b'["r","n","t@1",{"a":1}]').hexdigest()[:32]
    )
