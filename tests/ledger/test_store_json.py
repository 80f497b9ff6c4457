"""The stores' JSON text is ``json.dumps(v, ensure_ascii=False, allow_nan=False)`` exactly."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.ledger.sqlite import to_json
from actionspace.trace.store_encoding import encode_data, strict_dumps

_keys = st.text(max_size=6) | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lists = st.lists(inner, max_size=4) | st.tuples(inner)
    return lists | st.dictionaries(_keys, inner, max_size=4)


_values = st.recursive(_scalars, _containers, max_leaves=12)


def _reference(value: Any) -> str | type[BaseException]:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except Exception as exc:
        return type(exc)


def _ours(value: Any) -> str | type[BaseException]:
    try:
        return strict_dumps(value)
    except Exception as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(_values)
def test_strict_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    assert _ours(value) == _reference(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=6), _values, max_size=5))
def test_ledger_columns_and_trace_events_are_the_same_text(data: dict[str, Any]) -> None:
    expected = _reference(data)
    if isinstance(expected, str) and _repeats_a_key(expected):
        # json.dumps writes keys that print alike ({None: 1, "null": 2}) twice, and a reader keeps
        # one: the trace keeps both, the later under a name of its own
        written = _object_sizes(expected, repeats=True)
        kept = _object_sizes(encode_data(data), repeats=False)
        assert kept == written  # every key of every object, none of them twice
    elif isinstance(expected, str):
        assert to_json(data) == expected
        assert encode_data(data) == expected


def test_a_value_that_is_not_json_is_refused_as_before() -> None:
    assert _ours({"x": object()}) is TypeError
    assert _ours([float("inf")]) is ValueError
    assert _ours({(1, 2): 3}) is TypeError
    assert strict_dumps("é\n") == '"é\\n"'


def test_a_cycle_is_still_written_as_a_truncated_event() -> None:
    loop: list[Any] = []
    loop.append(loop)
    text = encode_data({"loop": loop})
    assert json.loads(text)["loop"]  # written, the cycle marked, never raised
    assert '"$truncated": "cycle"' in text


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Repeated
    return dict(pairs)


class _Repeated(Exception):
    pass


def _repeats_a_key(text: str) -> bool:
    try:
        json.loads(text, object_pairs_hook=_pairs)
    except _Repeated:
        return True
    return False


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    assert len(set(keys)) == len(keys), keys
    return dict(pairs)


def _object_sizes(text: str, *, repeats: bool) -> list[int]:
    """How many keys each object of ``text`` writes (with ``repeats=False``: asserting none twice)."""
    sizes: list[int] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        sizes.append(len(pairs) if repeats else len(_no_repeats(pairs)))
        return {}

    json.loads(text, object_pairs_hook=hook)
    return sizes
