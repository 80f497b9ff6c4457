"""A value whose conversion raises becomes a placeholder of its own, never of what holds it;
every cycle reads ``"<cycle>"``, whatever container closes it."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace._canonical import content_hash, dumps_plain, normalize, normalize_checked, normalize_key
from actionspace.observation import shape


class BadKey:
    """A key whose str() raises (and whose hash works)."""

    def __str__(self) -> str:
        raise RuntimeError("no text")

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return self is other


class BadStrKey(str):
    """A str key whose str() raises."""

    def __str__(self) -> str:
        raise ValueError("no text")

    __hash__ = str.__hash__


@dataclasses.dataclass
class Node:
    name: str
    next: Any = None


@dataclasses.dataclass
class Tree:
    children: list[Any]


def test_a_key_whose_str_raises_is_a_placeholder_and_the_rest_of_the_dict_is_kept() -> None:
    key = BadKey()
    plain = normalize({"a": 1, key: "kept value", "b": [2]})
    assert plain["a"] == 1 and plain["b"] == [2]
    placeholders = [k for k in plain if k not in ("a", "b")]
    assert len(placeholders) == 1
    assert "BadKey" in placeholders[0] and "RuntimeError" in placeholders[0]
    assert plain[placeholders[0]] == "kept value"


def test_a_str_subclass_key_whose_str_raises_keeps_its_value() -> None:
    plain = normalize({BadStrKey("k"): 5, "z": 6})
    assert plain["z"] == 6
    assert sorted(plain.values()) == [5, 6]


def test_two_unshowable_keys_of_one_type_are_both_kept() -> None:
    plain = normalize({BadKey(): 1, BadKey(): 2})
    assert sorted(plain.values()) == [1, 2]
    assert len(plain) == 2


def test_normalize_key_never_raises() -> None:
    assert "BadKey" in normalize_key(BadKey())


def test_a_cyclic_dataclass_is_a_cycle_like_a_cyclic_dict() -> None:
    node = Node("a")
    node.next = node
    assert normalize(node) == {"name": "a", "next": "<cycle>"}
    looped: dict[str, Any] = {"name": "a"}
    looped["next"] = looped
    assert normalize(looped) == {"name": "a", "next": "<cycle>"}


def test_a_cycle_through_a_list_inside_a_dataclass_is_a_cycle() -> None:
    tree = Tree(children=[])
    tree.children.append(tree)
    tree.children.append(Node("leaf"))
    assert normalize(tree) == {"children": ["<cycle>", {"name": "leaf", "next": None}]}


def test_a_dataclass_seen_twice_without_a_cycle_is_written_twice() -> None:
    leaf = Node("leaf")
    assert normalize(Tree(children=[leaf, leaf])) == {
        "children": [{"name": "leaf", "next": None}, {"name": "leaf", "next": None}]
    }


def test_a_dataclass_field_that_cannot_be_read_is_its_own_placeholder() -> None:
    @dataclasses.dataclass
    class Lazy:
        ok: int
        broken: Any = None

        def __getattribute__(self, name: str) -> Any:
            if name == "broken":
                raise RuntimeError("gone")
            return object.__getattribute__(self, name)

    plain = normalize(Lazy(ok=3))
    assert plain["ok"] == 3
    assert "RuntimeError" in plain["broken"]


def test_a_nested_dataclass_converts_as_asdict_did() -> None:
    value = Tree(children=[Node("x", next=Node("y")), (1, 2), {"k": Node("z")}])
    assert normalize(value) == normalize(dataclasses.asdict(value))


def test_a_cyclic_dataclass_result_shapes_and_hashes() -> None:
    node = Node("a")
    node.next = node
    shaped = shape({"node": node})
    assert shaped.data == {"node": {"name": "a", "next": "<cycle>"}}
    assert content_hash({"node": node}) == content_hash({"node": {"name": "a", "next": "<cycle>"}})


class Hostile:
    def __init__(self, fail: str) -> None:
        self.fail = fail

    def __str__(self) -> str:
        if "str" in self.fail:
            raise RuntimeError("str")
        return "hostile"

    def __repr__(self) -> str:
        if "repr" in self.fail:
            raise RuntimeError("repr")
        return "Hostile()"

    def __hash__(self) -> int:
        return hash(self.fail)


hostile = st.builds(Hostile, st.sampled_from(["", "str", "repr", "str repr"]))
keys = st.one_of(st.text(max_size=4), st.integers(-3, 3), hostile)
values = st.recursive(
    st.one_of(st.none(), st.integers(), st.text(max_size=4), hostile),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(keys, inner, max_size=4),
        st.builds(Node, st.text(max_size=3), inner),
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(values)
def test_normalize_keeps_every_entry_whatever_fails(value: Any) -> None:
    plain, _ = normalize_checked(value)
    dumps_plain(plain)  # plain JSON

    def count(v: Any) -> int:
        if isinstance(v, dict):
            return len(v) + sum(count(x) for x in v.values())
        if isinstance(v, list):
            return len(v) + sum(count(x) for x in v)
        if isinstance(v, Node):
            return 2 + count(v.name) + count(v.next)
        return 0

    assert count(plain) == count(value)
