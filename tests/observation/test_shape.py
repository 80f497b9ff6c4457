from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.errors import ConfigurationError
from actionspace.observation import (
    RULES,
    FolderArtifactStore,
    MemoryArtifactStore,
    Shaped,
    canonical_bytes,
    content_hash,
    shape,
)
from actionspace.types import Observation


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def test_a_small_scalar_comes_back_unchanged_with_its_hash() -> None:
    assert shape(3) == Shaped(data=3, trimming=None, complete=True, artifact_ref=None, content_hash=sha(b"3"))


def test_the_hash_is_of_sorted_compact_json() -> None:
    shaped = shape({"ok": True, "id": "é1"})
    assert shaped.data == {"ok": True, "id": "é1"}
    assert shaped.content_hash == sha('{"id":"é1","ok":true}'.encode())
    assert shaped.content_hash == content_hash({"id": "é1", "ok": True})


def test_equal_values_of_different_types_keep_their_type_and_hash() -> None:
    for _ in range(2):
        shaped = [shape(1), shape(True), shape(1.0), shape("1"), shape(None)]
        assert [type(s.data) for s in shaped] == [int, bool, float, str, type(None)]
        assert [s.content_hash for s in shaped] == [
            sha(b"1"),
            sha(b"true"),
            sha(b"1.0"),
            sha(b'"1"'),
            sha(b"null"),
        ]


def test_every_rule_is_registered_under_its_versioned_name() -> None:
    assert sorted(RULES) == ["json-v1", "log-v1", "search-v1", "web-v1"]
    assert all(RULES[key].key() == key for key in RULES)


class Color(enum.Enum):
    RED = "red"


class Invoice(pydantic.BaseModel):
    number: str
    due: dt.date
    color: Color


@dataclasses.dataclass
class Point:
    x: int
    y: float


def test_models_and_dataclasses_become_plain_json() -> None:
    value = {
        "invoice": Invoice(number="A-1", due=dt.date(2024, 5, 1), color=Color.RED),
        "point": Point(x=1, y=2.5),
        "tags": {"b", "a"},
        "when": dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC),
        "nan": float("nan"),
        7: "int key",
        "other": object,
    }
    data = shape(value).data
    assert data == {
        "invoice": {"number": "A-1", "due": "2024-05-01", "color": "red"},
        "point": {"x": 1, "y": 2.5},
        "tags": ["a", "b"],
        "when": "2024-05-01T12:00:00+00:00",
        "nan": "NaN",
        "7": "int key",
        "other": "<class 'object'>",
    }
    assert shape(Invoice(number="B", due=dt.date(2024, 1, 1), color=Color.RED)).data["number"] == "B"


def test_cyclic_values_do_not_hang() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert shape(loop).data == [1, "<cycle>"]


def test_an_unknown_rule_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="unknown trimming rule 'log-v9'"):
        shape("x", rule="log-v9")


def test_a_budget_under_256_bytes_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="at least 256"):
        shape(3, max_bytes=100)


def test_keep_raw_without_a_store_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="keep_raw"):
        shape({"a": 1}, keep_raw=True)


def test_keep_raw_stores_even_uncut_output() -> None:
    store = MemoryArtifactStore()
    shaped = shape({"b": 1, "a": [1, 2]}, keep_raw=True, artifacts=store)
    assert shaped.complete
    assert shaped.artifact_ref is not None
    assert store.get(shaped.artifact_ref) == b'{"a":[1,2],"b":1}'


def test_uncut_output_is_not_stored() -> None:
    store = MemoryArtifactStore()
    assert shape({"a": 1}, artifacts=store).artifact_ref is None
    assert shape(iter(["ok\n"]), rule="log-v1", artifacts=store).artifact_ref is None
    assert len(store) == 0


def test_a_large_stream_spills_into_the_store_byte_for_byte(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path)
    chunks = [f"line {n} {'x' * (n % 50)}\n".encode() for n in range(100_000)]
    shaped = shape(iter(chunks), rule="log-v1", artifacts=store)
    raw = b"".join(chunks)
    assert shaped.artifact_ref == "artifact://sha256/" + sha(raw)
    assert store.get(shaped.artifact_ref) == raw
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == len(raw)


def test_a_rule_given_a_value_of_another_kind_leaves_it_to_json() -> None:
    shaped = shape({"rows": [1, 2, 3]}, rule="log-v1")
    assert shaped.data == {"rows": [1, 2, 3]}
    assert shaped.trimming is None


def test_shaped_data_fills_an_observation_that_round_trips() -> None:
    shaped = shape({"exit_code": 1, "output": "a\nerror: b\n" * 2000}, rule="log-v1", max_bytes=1024)
    obs = Observation(
        call_id="c1",
        tool="run",
        data=shaped.data,
        complete=shaped.complete,
        content_hash=shaped.content_hash,
        trimming=shaped.trimming,
        artifact_ref=shaped.artifact_ref,
    )
    again = Observation.from_dict(json.loads(json.dumps(obs.to_dict())))
    assert again == obs
    assert content_hash(again.data) == shaped.content_hash


LINE = "2024-05-01T12:00:00.123Z INFO worker-3 request handled path=/api/v1/items status=200 in 12ms\n"


def two_hundred_megabytes() -> Iterator[bytes]:
    block = (LINE * 1000).encode()
    for n in range(200_000_000 // len(block) + 1):
        if n == 1000:
            yield b'Traceback (most recent call last):\n  File "w.py", line 3\nMemoryError: no\n'
        yield block


def test_a_200_megabyte_stream_is_shaped_in_bounded_memory() -> None:
    expected = sum(len(chunk) for chunk in two_hundred_megabytes())
    tracemalloc.start()
    try:
        started = time.perf_counter()
        shaped = shape(two_hundred_megabytes(), rule="log-v1")
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert expected > 200_000_000
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == expected
    assert shaped.data["total_lines"] == expected // len(LINE) + 3 - 1 + 1
    assert shaped.data["first_error"][3:6] == [
        "Traceback (most recent call last):",
        '  File "w.py", line 3',
        "MemoryError: no",
    ]
    assert peak < 4 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"
    assert elapsed < 60


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=40) | st.dictionaries(st.text(max_size=20), children, max_size=20)
    ),
    max_leaves=200,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, max_bytes=st.integers(256, 65_536))
def test_json_v1_is_bounded_honest_and_deterministic(value: Any, max_bytes: int) -> None:
    shaped = shape(value, max_bytes=max_bytes)
    kept = canonical_bytes(shaped.data)
    assert len(kept) <= max_bytes
    assert shaped.content_hash == sha(kept)
    assert shaped.complete == (kept == canonical_bytes(value))
    if shaped.complete:
        assert shaped.trimming is None
    else:
        assert shaped.trimming is not None
        assert shaped.trimming.kept_bytes == len(kept)
        assert shaped.trimming.original_bytes == len(canonical_bytes(value))
    again = shape(value, max_bytes=max_bytes)
    assert (again.data, again.content_hash) == (shaped.data, shaped.content_hash)


@settings(max_examples=100, deadline=None)
@given(value=json_values, max_bytes=st.integers(256, 8192))
def test_json_v1_bounds_large_values_too(value: Any, max_bytes: int) -> None:
    big = {"pad": "p" * max_bytes, "value": value, "list": [value] * 30}
    shaped = shape(big, max_bytes=max_bytes)
    assert len(canonical_bytes(shaped.data)) <= max_bytes
    assert not shaped.complete
