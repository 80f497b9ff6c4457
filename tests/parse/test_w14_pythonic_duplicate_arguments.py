"""A pythonic call (Llama 3.2/4 lists, Gemma ``tool_code``) that gives one argument twice —
``transfer(amount=10, amount=10000)`` — or a dict literal that gives one key twice is a
``duplicate_key`` parse error, as in every JSON and tagged format: readers disagree on which
value counts, so a call never carries one. ``ast.parse`` accepts the repeated keyword that the
compiler would refuse, and the call ran with the last value."""

from __future__ import annotations

import keyword
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import StreamParser, parse
from tests.session.w47_world import sends, world

CASES = [
    "[transfer(amount=10, amount=10000)]",
    "[transfer(to='bob', amount=10, to='eve')]",
    "[transfer(meta={'a': 1, 'a': 2})]",
    "[transfer(meta={'a': {'b': 1, 'b': 2}})]",
    "[transfer(meta=[{'k': 1}, {'k': 2, 'k': 3}])]",
    "[ok(x=1), transfer(amount=1, amount=2)]",
    "```tool_code\ntransfer(amount=10, amount=10000)\n```",
    "<|python_start|>[transfer(amount=10, amount=10000)]<|python_end|>",
]


@pytest.mark.parametrize("text", CASES)
def test_an_argument_or_key_given_twice_is_a_duplicate_key(text: str) -> None:
    result = parse(text)
    error = result.error
    assert error is not None and error.category == "parse_error" and error.recovery
    assert error.details["reason"] == "duplicate_key", error.message
    assert all(c.name != "transfer" for c in result.calls)
    stream = StreamParser()
    for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
        stream.feed(piece)
    streamed = stream.finish()
    assert streamed.error is not None and streamed.error.details["reason"] == "duplicate_key"


def test_distinct_arguments_and_keys_still_read() -> None:
    result = parse("[transfer(amount=10, to='bob', meta={'a': 1, 'b': {'a': 2}}), f(a=1)]")
    assert result.error is None
    assert [c.arguments for c in result.calls] == [
        {"amount": 10, "to": "bob", "meta": {"a": 1, "b": {"a": 2}}},
        {"a": 1},
    ]


_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(lambda n: not keyword.iskeyword(n))


@settings(max_examples=50, deadline=None)
@given(
    names=st.lists(_NAMES, min_size=1, max_size=5, unique=True),
    again=st.integers(0, 4),
    values=st.lists(st.integers(-(10**6), 10**6), min_size=6, max_size=6),
)
def test_any_repeated_keyword_is_refused(names: list[str], again: int, values: list[int]) -> None:
    repeated = names[again % len(names)]
    pairs = [*names, repeated]
    text = "[f(" + ", ".join(f"{n}={v}" for n, v in zip(pairs, values, strict=False)) + ")]"
    result = parse(text)
    assert result.calls == ()
    assert result.error is not None and result.error.details["reason"] == "duplicate_key"


def test_the_session_sends_nothing_for_a_repeated_argument(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox.db"
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", outbox)
    s = rt.session(run_id="conv-1", provider="openai_chat")
    s.user("text Bob")
    turn = s.handle("[send_sms(to='+15550100', text='hi', to='+15550199')]")
    (obs,) = turn.observations
    assert obs.error is not None and obs.error.category == "parse_error"
    assert obs.error.details["reason"] == "duplicate_key"
    assert sends(outbox) == []
    rt.close()
