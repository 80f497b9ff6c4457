"""What a trace store writes for an event does not depend on the order its mappings were built in,
on the process's string hash seed, or on where its objects live in memory: two equal events,
built apart, read back alike. A value holding itself is written in bounded time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, bounded_raw, encode_data


class Plain:
    """An object with the default repr (which names its address)."""


class Same:
    """Keys of one type that print alike and are never equal to one another."""

    def __str__(self) -> str:
        return "same"

    __repr__ = __str__


def _read(data: dict[str, Any]) -> Any:
    return json.loads(encode_data(data))


def test_keys_writing_alike_are_named_the_same_whatever_the_insertion_order() -> None:
    forward = {1: "int", "1": "str", None: "none", "null": "text", False: "bool", "false": "no"}
    backward = dict(reversed(list(forward.items())))
    first, second = _read({"args": forward}), _read({"args": backward})
    assert first == second
    assert first["args"]["1"] == "str" and first["args"]["null"] == "text"  # text keys keep their text
    assert sorted(first["args"].values()) == sorted(forward.values())


def test_objects_printing_alike_as_keys_are_named_by_their_values_in_any_order() -> None:
    a, b = Same(), Same()
    assert _read({"k": {a: "x", b: "y"}}) == _read({"k": {b: "y", a: "x"}})
    assert sorted(_read({"k": {a: "x", b: "y"}})["k"].values()) == ["x", "y"]


def test_a_stored_event_reads_back_alike_whatever_order_its_mappings_were_built_in(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    built = {2.0: "float", "2.0": "text", "s": {3, 1, 2}}
    try:
        store.append_records("r", [(0, "observation", 1.0, None, {"v": built})])
        reversed_built = dict(reversed(list(built.items())))
        store.append_records("r", [(1, "observation", 1.0, None, {"v": reversed_built})])
        first, second = (event.data for event in store.events("r"))
    finally:
        store.close()
    assert first == second == {"v": {"2.0": "text", "2.0 (float)": "float", "s": "{1, 2, 3}"}}


_pairs = st.lists(
    st.tuples(st.sampled_from([1, "1", 2.5, "2.5", None, "null", False, "false", "1 (int)"]), st.integers()),
    max_size=9,
    unique_by=lambda pair: (type(pair[0]), pair[0]),
)


@settings(max_examples=200, deadline=None)
@given(_pairs, st.randoms(use_true_random=False))
def test_any_insertion_order_of_colliding_keys_encodes_to_the_same_object(
    pairs: list[tuple[Any, int]], random: Any
) -> None:
    shuffled = list(pairs)
    random.shuffle(shuffled)
    first, second = _read({"k": dict(pairs)}), _read({"k": dict(shuffled)})
    assert first == second
    assert sorted(first["k"].values()) == sorted(dict(pairs).values())  # nothing lost


def test_default_reprs_are_written_without_an_object_address() -> None:
    text = encode_data({"o": Plain(), "k": {Plain(): 1}})
    assert "0x" not in text
    assert encode_data({"o": Plain(), "k": {Plain(): 1}}) == text


_IN_A_PROCESS = """
import json
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, bounded_raw, encode_data

value = {
    "set": {"alpha", "beta", "gamma", "delta", "epsilon"},
    "frozen": frozenset({"p", "q", "r", "s"}),
    "keys": {frozenset({"a", "b", "c", "d"}): 1, ("t", frozenset({"x", "y", "z"})): 2, 3: "int"},
}
print(encode_data(value))
"""


def test_sets_write_the_same_text_whatever_the_string_hash_seed() -> None:
    seen = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _IN_A_PROCESS], env=env, capture_output=True, text=True, check=True
        )
        seen.add(done.stdout)
    assert len(seen) == 1, seen
    read = json.loads(seen.pop())
    assert read["set"] == "{'alpha', 'beta', 'delta', 'epsilon', 'gamma'}"
    assert read["keys"]["frozenset({'a', 'b', 'c', 'd'})"] == 1


def test_a_list_holding_itself_twice_is_written_with_the_cycle_marked() -> None:
    # each level doubles: without cycle detection the encoder walks 2**64 paths
    loop: list[Any] = []
    loop.append(loop)
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["a"] = mapping
    mapping["b"] = [mapping, mapping]
    read = _read({"loop": loop, "mapping": mapping, "kept": 1})
    assert read["kept"] == 1
    assert read["loop"] == [{"$truncated": "cycle"}, {"$truncated": "cycle"}]
    assert read["mapping"] == {"a": {"$truncated": "cycle"}, "b": [{"$truncated": "cycle"}] * 2}


def test_a_value_shared_but_not_cyclic_is_written_whole_each_time() -> None:
    shared = [1, 2]
    read = _read({"v": [shared, shared], "s": {1}})
    assert read["v"] == [[1, 2], [1, 2]]


class Boom:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    __str__ = __repr__


def test_a_model_output_whose_repr_raises_is_recorded_by_its_type_its_repr_never_run() -> None:
    assert bounded_raw(Boom()) == {"raw": "<tests.trace.test_w9_store_encoding_order.Boom object>"}
    assert (
        bounded_raw(Plain())
        == bounded_raw(Plain())
        == {"raw": "<tests.trace.test_w9_store_encoding_order.Plain object>"}
    )


def test_an_oversized_event_keeps_colliding_short_fields_whatever_their_order() -> None:
    big = "x" * (MAX_EVENT_CHARS + 1)
    forward: dict[Any, Any] = {1: "int", "1": "str", "blob": big}
    backward: dict[Any, Any] = {"blob": big, "1": "str", 1: "int"}
    first, second = _read(forward), _read(backward)
    assert {k: v for k, v in first.items() if k != "$truncated"} == {"1": "str", "1 (int)": "int"}
    assert {k: v for k, v in second.items() if k != "$truncated"} == {"1": "str", "1 (int)": "int"}
