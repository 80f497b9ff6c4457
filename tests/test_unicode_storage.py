"""How stores write text UTF-8 or PostgreSQL cannot hold (``actionspace._unicode``), and how a
proposal's arguments are checked for it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings

from actionspace._unicode import (
    REPLACEMENT,
    json_for_postgres,
    json_for_utf8,
    text_for_postgres,
    text_for_utf8,
    unfit_text,
)
from tests.text_strategies import any_text, json_values


def _unfit(text: str) -> bool:
    return "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _texts(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in [k, *_texts(v)]]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_for_utf8_reads_back_the_same_and_encodes(value: Any) -> None:
    text = json_for_utf8(json.dumps(value, ensure_ascii=False))
    text.encode("utf-8")
    assert json.loads(text) == _paired(value)


def _paired(value: Any) -> Any:
    """``value`` with each high surrogate directly followed by a low one read as the character
    the two encode together (as JSON reads their escapes); lone ones kept."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, dict):
        return {_paired(k): _paired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_paired(v) for v in value]
    return value


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_for_postgres_replaces_exactly_what_jsonb_refuses(value: Any) -> None:
    text = json_for_postgres(json.dumps(value, ensure_ascii=False))
    text.encode("utf-8")
    back = json.loads(text)
    assert unfit_text(back) is None
    got = [t.replace(REPLACEMENT, "?") for t in _texts(back)]
    wanted = ["".join("?" if _unfit(c) or c == REPLACEMENT else c for c in t) for t in _texts(value)]
    assert len(got) == len(wanted)  # no key and no value dropped
    for have, want in zip(got, wanted, strict=True):  # a key told apart from its sibling ends in "?"s
        assert have == want or (have.startswith(want) and set(have[len(want) :]) == {"?"})


def test_keys_that_become_the_same_for_jsonb_are_both_kept() -> None:
    text = json_for_postgres(
        json.dumps(dict([("\ud800", 1), ("\udfff", 2), ("\ufffd", 3)]), ensure_ascii=False)
    )
    assert json.loads(text) == {"\ufffd": 1, "\ufffd\ufffd": 2, "\ufffd\ufffd\ufffd": 3}


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_plain_text_columns_get_a_replacement_for_each_code_point(text: str) -> None:
    utf8, pg = text_for_utf8(text), text_for_postgres(text)
    utf8.encode("utf-8")
    assert "\x00" not in pg and len(pg) == len(utf8) == len(text)
    assert [a == b for a, b in zip(utf8, text, strict=True)] == [
        not (0xD800 <= ord(c) <= 0xDFFF) for c in text
    ]


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_unfit_text_finds_what_a_walk_of_every_string_finds(value: Any) -> None:
    found = unfit_text(value)
    assert (found is not None) == any(_unfit(t) for t in _texts(value))
    if found is not None:  # the pointer leads to such a string (or to the key holding it)
        pointer, reason = found
        assert pointer == "" or pointer.startswith("/")
        assert "U+" in reason


def test_unfit_text_walks_any_depth_without_recursion() -> None:
    deep: Any = "\ud800"
    for _ in range(100_000):
        deep = [deep]
    found = unfit_text({"a": deep})
    assert found is not None and found[0] == "/a" + "/0" * 100_000


@pytest.mark.parametrize(
    "arguments",
    [{"a": 1, "b": "x", "c": None, "d": 1.5, "e": True}, {"nested": {"list": [1, "two", {"x": "é"}]}}],
)
def test_arguments_of_plain_text_pass(arguments: dict[str, Any]) -> None:
    assert unfit_text(arguments) is None


def test_a_postgres_store_takes_what_the_encoders_write(pg_url: str) -> None:
    import psycopg

    values = [{"k\x00": ["\ud800", "a\x00b", "\\u0000 literal", "\\\\u0000"]}, ["ok", "é", "\U0001f600"]]
    with psycopg.connect(pg_url) as conn:
        for value in values:
            text = json_for_postgres(json.dumps(value, ensure_ascii=False))
            stored = conn.execute("SELECT %s::jsonb", (text,)).fetchone()
            assert stored is not None and unfit_text(stored[0]) is None
            assert conn.execute("SELECT %s::text", (text_for_postgres("a\x00\udce9"),)).fetchone() == (
                f"a{REPLACEMENT}{REPLACEMENT}",
            )
