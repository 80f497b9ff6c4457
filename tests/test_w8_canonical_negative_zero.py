"""``-0.0`` and ``0.0`` are one JSON number: RFC 8785 writes both as ``0``. The fast canonical form
(content hashes, byte budgets) and ``normalize`` (what an observation carries) agree with it, so a
result or an argument holding a negative zero hashes as the same value holding ``0.0``; the
idempotency key and the argument digest (exact RFC 8785) already did, and stay as they were."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import (
    args_digest,
    canonical_bytes,
    canonical_json,
    canonical_text,
    content_hash,
    json_size,
    normalize,
)
from actionspace.ledger.keys import idempotency_key
from actionspace.observation import shape

_LEAVES = st.one_of(
    st.sampled_from([0.0, -0.0, 1.5, -0.05, -0.0001, 0, 7, "-0.0", "x-0.0y", None, True]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


def _zero_flipped(value: Any) -> Any:
    """``value`` with every zero float's sign flipped."""
    if isinstance(value, float) and value == 0:
        return -value
    if isinstance(value, list):
        return [_zero_flipped(item) for item in value]
    if isinstance(value, dict):
        return {key: _zero_flipped(item) for key, item in value.items()}
    return value


def test_negative_zero_writes_as_zero_in_every_canonical_form() -> None:
    for value in ({"a": -0.0}, [-0.0, {"b": [-0.0]}], -0.0):
        flipped = _zero_flipped(value)
        assert canonical_text(value) == canonical_text(flipped)
        assert content_hash(value) == content_hash(flipped)
        assert canonical_bytes(value) == canonical_bytes(flipped)
        assert json_size(value) == json_size(flipped)
        assert canonical_json(value) == canonical_json(flipped)
        assert args_digest(value) == args_digest(flipped)
        assert idempotency_key("r", "n", "t@1", value) == idempotency_key("r", "n", "t@1", flipped)
    assert "-0" not in canonical_text({"a": -0.0, "b": [-0.0]})
    assert canonical_text({"a": -0.0}) == canonical_text({"a": 0.0}) == '{"a":0.0}'


def test_normalize_writes_negative_zero_as_zero() -> None:
    normalized = normalize({"a": -0.0, "b": [-0.0], "c": -0.5})
    assert math.copysign(1.0, normalized["a"]) == 1.0
    assert math.copysign(1.0, normalized["b"][0]) == 1.0
    assert normalized["c"] == -0.5


def test_text_that_merely_reads_like_negative_zero_is_kept() -> None:
    value = {"s": "-0.0", "f": -0.05, "g": -0.0001, "k": [-0.0]}
    assert json.loads(canonical_text(value)) == {"s": "-0.0", "f": -0.05, "g": -0.0001, "k": [0.0]}
    assert canonical_text({"s": "-0.0"}) == '{"s":"-0.0"}'


@settings(max_examples=300, deadline=None)
@given(value=_VALUES)
def test_flipping_the_sign_of_zeros_changes_no_hash(value: Any) -> None:
    flipped = _zero_flipped(value)
    assert content_hash(value) == content_hash(flipped)
    assert canonical_text(value) == canonical_text(flipped)
    assert args_digest(value) == args_digest(flipped)
    assert json.loads(canonical_text(value)) == json.loads(json.dumps(value))


def test_a_shaped_observation_of_a_negative_zero_is_that_of_zero() -> None:
    for value in (-0.0, {"a": -0.0, "b": [1, -0.0]}, [-0.0] * 200):
        negative, positive = shape(value, max_bytes=256), shape(_zero_flipped(value), max_bytes=256)
        assert negative.content_hash == positive.content_hash
        assert canonical_bytes(negative.data) == canonical_bytes(positive.data)
        assert negative.complete == positive.complete
        if negative.trimming is not None:
            assert positive.trimming is not None
            assert negative.trimming.original_bytes == positive.trimming.original_bytes
