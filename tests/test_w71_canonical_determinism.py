"""Equal results normalize to equal JSON and equal content hashes, however and wherever they were
built: no object address, no order a mapping or set happened to hold, decides what is written."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import pydantic
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import content_hash, normalize
from actionspace._json_values import whole_json
from actionspace.observation import shape


class Linked(pydantic.BaseModel):
    name: str
    next: Any = None


class Open(pydantic.BaseModel, extra="allow"):
    name: str


@dataclasses.dataclass
class Node:
    name: str
    next: Any = None


class Plain:
    """An object with the default repr (which names its address)."""


class Same:
    """Keys that write alike (default str) and are never equal to one another."""


def whole(value: Any) -> Any:
    return json.loads("".join(whole_json(value)))


def test_a_pydantic_model_inside_itself_normalizes_to_a_cycle_marker() -> None:
    model = Linked(name="a")
    model.next = model
    assert normalize(model) == {"name": "a", "next": "<cycle>"}
    assert normalize({"m": [model]}) == {"m": [{"name": "a", "next": "<cycle>"}]}


def test_two_separately_built_cyclic_models_hash_alike() -> None:
    def build() -> Linked:
        model = Linked(name="b", next={"x": None, "y": [1]})
        model.next["x"] = model
        return model

    first, second = build(), build()
    assert normalize(first) == normalize(second) == {"name": "b", "next": {"x": "<cycle>", "y": [1]}}
    assert content_hash(first) == content_hash(second)
    assert shape(first).content_hash == shape(second).content_hash


def test_a_cyclic_model_normalizes_as_the_whole_text_writes_it() -> None:
    model = Open.model_validate({"name": "o", "extra_field": []})
    extra = model.__pydantic_extra__
    assert extra is not None
    extra["extra_field"].append(model)
    assert normalize(model) == whole(model) == {"name": "o", "extra_field": ["<cycle>"]}


def test_objects_printed_by_their_default_repr_carry_no_address() -> None:
    def f() -> None: ...

    first = normalize({"o": Plain(), "f": f, "s": {Plain(), "x"}})
    second = normalize({"o": Plain(), "f": f, "s": {"x", Plain()}})
    assert first == second
    assert "0x" not in json.dumps(first)
    assert "Plain" in first["o"] and "f" in first["f"]
    assert content_hash({"k": Plain()}) == content_hash({"k": Plain()})


def test_a_key_printed_by_its_default_repr_carries_no_address() -> None:
    first, second = normalize({Plain(): 1}), normalize({Plain(): 1})
    assert first == second and "0x" not in next(iter(first))


def test_keys_writing_alike_are_named_the_same_whatever_the_order() -> None:
    forward = {1: "int", "1": "str", None: "none", "null": "text", False: "bool", "false": "no"}
    backward = dict(reversed(list(forward.items())))
    assert normalize(forward) == normalize(backward)
    assert normalize(forward)["1"] == "str"  # the string key keeps its own text
    assert normalize(forward)["null"] == "text"
    assert content_hash(forward) == content_hash(backward)
    assert whole(forward) == whole(backward) == normalize(forward)


def test_keys_of_one_type_writing_alike_are_named_by_their_values() -> None:
    a, b = Same(), Same()
    first = normalize({a: "x", b: "y"})
    second = normalize({b: "y", a: "x"})
    assert first == second
    assert sorted(first.values()) == ["x", "y"]
    assert whole({b: "y", a: "x"}) == first


def test_a_literal_key_keeps_its_text_before_a_generated_name() -> None:
    # "1 (int)" is the name the int key would be given; a string key holding it keeps it
    first = normalize({1: "a", "1": "b", "1 (int)": "c"})
    second = normalize({"1 (int)": "c", "1": "b", 1: "a"})
    assert first == second
    assert first["1"] == "b" and first["1 (int)"] == "c"
    assert sorted(first.values()) == ["a", "b", "c"]


# ---------------------------------------------------------------- equal structures, built twice

_leaf_recipes = st.one_of(
    st.tuples(st.just("int"), st.integers(-3, 3)),
    st.tuples(st.just("text"), st.sampled_from(["", "1", "a", "null"])),
    st.tuples(st.just("plain"), st.none()),
)


def _recipes() -> st.SearchStrategy[Any]:
    def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.tuples(st.just("list"), st.lists(inner, max_size=3)),
            st.tuples(
                st.just("dict"),
                st.lists(
                    st.tuples(st.sampled_from([1, "1", "a", None, "null", 2.0, "2.0"]), inner),
                    max_size=4,
                    unique_by=lambda pair: pair[0],
                ),
            ),
            st.tuples(st.just("node"), st.lists(inner, min_size=1, max_size=1)),
            st.tuples(st.just("model"), st.lists(inner, min_size=1, max_size=1)),
            st.tuples(st.just("set"), st.lists(st.sampled_from([1, "1", "a"]), max_size=3)),
        )

    return st.recursive(_leaf_recipes, containers, max_leaves=12)


def _build(recipe: Any, reverse: bool) -> Any:
    """A fresh value from ``recipe``; ``reverse`` builds each dict in the opposite order."""
    kind, body = recipe
    if kind == "int":
        return body
    if kind == "text":
        return body
    if kind == "plain":
        return Plain()
    if kind == "list":
        return [_build(r, reverse) for r in body]
    if kind == "dict":
        pairs = [(k, _build(r, reverse)) for k, r in body]
        return dict(reversed(pairs) if reverse else pairs)
    if kind == "node":
        return Node("n", _build(body[0], reverse))
    if kind == "model":
        return Linked(name="m", next=_build(body[0], reverse))
    return set(body) if not reverse else set(reversed(body))


def _close(value: Any) -> Any:
    """Make the first container found hold the top value (a cycle through everything above it)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            item.append(value)
            return value
        if isinstance(item, dict):
            item["loop"] = value
            return value
        if isinstance(item, Node | Linked):
            if isinstance(item.next, Node | Linked | list | dict):
                stack.append(item.next)
                continue
            item.next = value
            return value
    return value


@settings(max_examples=200, deadline=None)
@given(_recipes(), st.booleans(), st.booleans())
def test_equal_structures_built_apart_normalize_and_hash_alike(
    recipe: Any, cyclic: bool, reverse: bool
) -> None:
    first, second = _build(recipe, False), _build(recipe, reverse)
    if cyclic:
        first, second = _close(first), _close(second)
    plain = normalize(first)
    assert normalize(second) == plain
    assert content_hash(first) == content_hash(second)
    text = json.dumps(plain)
    assert "0x" not in text and "id=" not in text
    assert whole(first) == whole(second) == plain


_IN_A_PROCESS = """
import enum, json
from actionspace._canonical import content_hash, normalize
from actionspace._json_values import whole_json

class Kind(enum.Enum):
    ALL = frozenset({"x", "y", "z", "w"})

value = {
    frozenset({"a", "b", "c", "d"}): 1,
    ("t", frozenset({"p", "q", "r"})): 2,
    Kind.ALL: 3,
    "set": {"m", "n", "o"},
}
print(json.dumps([normalize(value), content_hash(value), "".join(whole_json(value))]))
"""


def test_set_keys_write_the_same_text_whatever_the_string_hash_seed() -> None:
    seen = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _IN_A_PROCESS], env=env, capture_output=True, text=True, check=True
        )
        seen.add(done.stdout)
    assert len(seen) == 1, seen
    plain, _, written = json.loads(seen.pop())
    assert json.loads(written) == plain
    assert plain["frozenset({'a', 'b', 'c', 'd'})"] == 1
    assert plain["('t', frozenset({'p', 'q', 'r'}))"] == 2


class Tagged(pydantic.BaseModel):
    name: str
    tags: set[str]
    anything: Any = None


_SET_IN_A_MODEL = """
import json, pydantic
from typing import Any
from actionspace._canonical import content_hash, normalize
from actionspace._json_values import whole_json

class Tagged(pydantic.BaseModel):
    name: str
    tags: set[str]
    anything: Any = None

value = Tagged(name="t", tags={"p", "q", "r", "s"}, anything={1, "a", "b"})
print(json.dumps([normalize(value), content_hash(value), "".join(whole_json(value))]))
"""


def test_a_set_inside_a_model_writes_sorted_whatever_its_order_or_the_hash_seed() -> None:
    first = Tagged(name="m", tags=set(), anything={1, "a"})
    second = Tagged(name="m", tags=set(), anything={"a", 1})
    assert normalize(first) == normalize(second) == whole(first) == whole(second)
    assert content_hash(first) == content_hash(second)
    seen = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SET_IN_A_MODEL], env=env, capture_output=True, text=True, check=True
        )
        seen.add(done.stdout)
    assert len(seen) == 1, seen
    plain, _, written = json.loads(seen.pop())
    assert json.loads(written) == plain
    assert plain["tags"] == ["p", "q", "r", "s"]
