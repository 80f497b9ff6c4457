"""Every incomplete observation of a JSON result has an artifact holding the whole of it, even when
the result nests deeper than the encoder's bound or holds an integer too long to print."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.observation import FolderArtifactStore, MemoryArtifactStore, shape


def nested(levels: int, leaf: Any = None) -> list[Any]:
    top: list[Any] = []
    current = top
    for _ in range(levels - 1):
        inner: list[Any] = []
        current.append(inner)
        current = inner
    if leaf is not None:
        current.append(leaf)
    return top


def test_a_result_nested_past_the_bound_keeps_all_its_levels_in_its_artifact() -> None:
    store = MemoryArtifactStore()
    shaped = shape(nested(1100), artifacts=store)
    assert not shaped.complete
    assert shaped.artifact_ref is not None
    whole = store.get(shaped.artifact_ref)
    assert whole == b"[" * 1100 + b"]" * 1100
    assert shaped.trimming is not None and shaped.trimming.original_bytes == len(whole)


def test_an_integer_too_long_to_print_is_written_whole_in_the_artifact() -> None:
    store = MemoryArtifactStore()
    shaped = shape({"n": 10**5000, "ok": True}, artifacts=store)
    assert not shaped.complete
    assert shaped.artifact_ref is not None
    assert store.get(shaped.artifact_ref) == b'{"n":1' + b"0" * 5000 + b',"ok":true}'


def test_a_negative_integer_past_the_digit_limit_is_written_whole() -> None:
    store = MemoryArtifactStore()
    shaped = shape([-(10**4300) - 7], artifacts=store)
    assert shaped.artifact_ref is not None
    assert store.get(shaped.artifact_ref) == b"[-1" + b"0" * 4299 + b"7]"


def test_a_deep_result_cut_to_a_small_budget_stores_the_whole_not_the_cut() -> None:
    store = MemoryArtifactStore()
    value = {"head": "x" * 2000, "deep": nested(1500, leaf="bottom")}
    shaped = shape(value, artifacts=store, max_bytes=300)
    assert not shaped.complete and shaped.artifact_ref is not None
    whole = store.get(shaped.artifact_ref).decode()
    assert "nested too deep" not in whole
    assert '"bottom"' in whole
    assert whole.count("[") == 1500
    assert shaped.trimming is not None and shaped.trimming.original_bytes == len(whole)


def test_keep_raw_stores_the_whole_of_a_deep_result_too() -> None:
    store = MemoryArtifactStore()
    shaped = shape(nested(1200), artifacts=store, keep_raw=True)
    assert shaped.artifact_ref is not None
    assert store.get(shaped.artifact_ref) == b"[" * 1200 + b"]" * 1200


@dataclasses.dataclass
class Node:
    name: str
    child: Any = None


def test_objects_below_the_bound_are_written_as_their_fields(tmp_path: Any) -> None:
    store = FolderArtifactStore(tmp_path)
    value = nested(1000, leaf=Node("a", Node("b", {(1, 2): {3, 1}, None: b"\xff", 7: float("nan")})))
    shaped = shape(value, artifacts=store)
    assert not shaped.complete and shaped.artifact_ref is not None
    whole = store.get(shaped.artifact_ref).decode()
    assert whole.startswith("[" * 1000) and whole.endswith("]" * 1000)
    assert json.loads(whole[1000:-1000]) == {
        "child": {"child": {"(1, 2)": [1, 3], "7": "NaN", "null": "\ufffd"}, "name": "b"},
        "name": "a",
    }


def test_a_cycle_below_the_bound_is_written_as_a_marker() -> None:
    store = MemoryArtifactStore()
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    shaped = shape(nested(1100, leaf=loop), artifacts=store)
    assert shaped.artifact_ref is not None
    assert b'{"name":"loop","self":"<cycle>"}' in store.get(shaped.artifact_ref)


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_an_object_that_cannot_be_shown_below_the_bound_becomes_its_placeholder() -> None:
    store = MemoryArtifactStore()
    shaped = shape(nested(1100, leaf=Hostile()), artifacts=store)
    assert shaped.artifact_ref is not None
    assert b'"<Hostile object: cannot be shown (RuntimeError)>"' in store.get(shaped.artifact_ref)


class BigInt(int):
    """An integer past the digit limit whose ``repr`` a failing example can still print."""

    def __repr__(self) -> str:
        return f"BigInt(<{self.bit_length()} bits>)"


def _deepen(levels: int, inner: Any) -> Any:
    for at in range(levels):
        inner = [inner] if at % 2 else {"k": inner}
    return inner


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from([4400, -5000, 6000]).map(
        lambda digits: BigInt(10 ** abs(digits) * (digits // abs(digits)))
    ),
)
_TREES = st.recursive(
    _LEAVES,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=5), children, max_size=3),
        st.tuples(st.integers(0, 400), children).map(lambda pair: _deepen(*pair)),
    ),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(value=_TREES, max_bytes=st.sampled_from([256, 2048, 1 << 16]))
def test_every_incomplete_shape_has_a_readable_artifact(value: Any, max_bytes: int) -> None:
    store = MemoryArtifactStore()
    shaped = shape(value, artifacts=store, max_bytes=max_bytes)
    assert len(json.dumps(shaped.data, allow_nan=False).encode()) <= max_bytes * 6
    if not shaped.complete:
        assert shaped.artifact_ref is not None and store.exists(shaped.artifact_ref)
        whole = store.get(shaped.artifact_ref)
        assert b"nested too deep" not in whole and b"<int of" not in whole
        assert shaped.trimming is not None and shaped.trimming.original_bytes == len(whole)


class FullDisk(MemoryArtifactStore):
    def put(self, data: bytes) -> str:
        raise OSError(28, "No space left on device")

    def put_stream(self, chunks: Any) -> str:
        next(iter(chunks))
        raise OSError(28, "No space left on device")


def test_a_store_that_fails_midway_leaves_no_ref_and_still_counts_the_whole() -> None:
    shaped = shape({"n": 10**5000, "deep": nested(1100)}, artifacts=FullDisk())
    assert not shaped.complete and shaped.artifact_ref is None
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == len(b'{"deep":,"n":}') + 2200 + 5001
