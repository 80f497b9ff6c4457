"""A collection a tool returns (a deque, a dict's keys or values) is a value, not chunks of text.

Only an iterator (a generator, a file, ``map(...)``) or an iterable without a length is read as a
stream of text chunks; a collection's strings are its items and stay apart.
"""

from __future__ import annotations

from collections import deque

from hypothesis import given
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.observation import shape

words = st.lists(st.text(max_size=8), max_size=8)


@given(words)
def test_a_deque_of_strings_is_shaped_as_the_list_of_them(items: list[str]) -> None:
    shaped = shape(deque(items))
    assert shaped.data == items
    assert shaped.content_hash == shape(items).content_hash


@given(words, words)
def test_dict_keys_that_differ_never_shape_alike(first: list[str], second: list[str]) -> None:
    a, b = dict.fromkeys(first), dict.fromkeys(second)
    if list(a) != list(b):
        assert shape(a.keys()).content_hash != shape(b.keys()).content_hash


def test_dict_keys_keep_each_key_apart() -> None:
    joined = shape({"ab": 1, "c": 2}.keys())
    split = shape({"a": 1, "bc": 2}.keys())
    assert joined.data != split.data


def test_a_tool_returning_a_deque_gives_the_model_its_items() -> None:
    rt = Runtime("memory://")
    rt.add_tool(
        name="recent",
        input_schema={"type": "object", "properties": {}},
        fn=lambda: deque(["deploy", "rollback"]),
        effect="read",
    )
    obs = rt.call({"name": "recent", "arguments": {}})
    assert obs.status == "ok" and obs.complete
    assert obs.data == ["deploy", "rollback"]


def test_a_generator_of_text_chunks_is_still_read_as_one_text() -> None:
    shaped = shape(chunk for chunk in ("line one\n", "line two\n"))
    assert shaped.data == "line one\nline two\n"
