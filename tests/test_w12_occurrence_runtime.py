"""``Runtime.acall`` / ``Runtime.call`` with ``occurrence=``: a call of a model message run on its
own is the action a session makes of it within the whole message.

A session reads a logical action as (turn, tool@version, canonical arguments, occurrence within
the message). A caller that runs a message's calls one at a time (a framework's tools node) tells
the runtime how many identical calls came before each one; the runtime then derives the node and
the idempotency key the session derives, so the n-th identical write is sent, and the message run
again replays every one of them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError

SEND = {"to": "bob", "text": "hi"}


def _runtime(mailed: list[str]) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="write", writes=["mail:{to}"])
    def send(to: str, text: str) -> dict[str, str]:
        """Send a message."""
        mailed.append(to)
        return {"sent": to}

    @rt.tool(effect="read")
    def inbox(box: str) -> list[str]:
        """The messages of a box."""
        return [box]

    rt.add_tool(
        name="book",
        input_schema={
            "type": "object",
            "properties": {"at": {"type": "string", "format": "date-time"}, "seats": {"type": "integer"}},
            "required": ["at", "seats"],
        },
        fn=lambda at, seats: {"booked": at},
        effect="write",
    )
    return rt


def _call(call_id: str, arguments: dict[str, Any], name: str = "send") -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _nodes(rt: Runtime, run_id: str) -> list[tuple[str, str]]:
    return sorted((e.node_id, e.key) for e in rt.ledger.list() if e.run_id == run_id)


def test_the_second_identical_write_of_a_message_is_sent_when_its_occurrence_is_given() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    run = rt.new_run()
    first = rt.call(_call("c1", SEND), run_id=run)
    second = rt.call(_call("c2", SEND), run_id=run, occurrence=1)
    assert [first.status, second.status] == ["ok", "ok"]
    assert "replayed" not in second.diagnostics and mailed == ["bob", "bob"]
    rt.close()


def test_without_an_occurrence_the_second_identical_write_is_replayed_as_before() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    run = rt.new_run()
    rt.call(_call("c1", SEND), run_id=run)
    again = rt.call(_call("c2", SEND), run_id=run)
    assert again.diagnostics.get("replayed") is True and mailed == ["bob"]
    rt.close()


def test_the_message_run_again_call_by_call_replays_every_identical_write() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    run = rt.new_run()

    async def message() -> list[Any]:
        return [
            await rt.acall(_call("c1", SEND), run_id=run, occurrence=0),
            await rt.acall(_call("c2", SEND), run_id=run, occurrence=1),
        ]

    asyncio.run(message())
    again = asyncio.run(message())
    assert [o.diagnostics.get("replayed") for o in again] == [True, True]
    assert mailed == ["bob", "bob"] and len(rt.ledger.list()) == 2
    rt.close()


def test_the_nodes_and_keys_are_those_a_session_gives_the_whole_message() -> None:
    """Each identical call, run alone with its occurrence, lands on the ledger row the session
    writes for the message of all of them (the same node and idempotency key)."""
    message = [_call(f"c{i}", SEND) for i in range(3)]
    by_session, alone = _runtime([]), _runtime([])
    s = by_session.session(run_id="conv", provider="openai_chat")
    s.user("Tell Bob hi, three times")
    entries = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": "send", "arguments": '{"to":"bob","text":"hi"}'},
        }
        for c in message
    ]
    s.handle({"role": "assistant", "content": None, "tool_calls": entries})
    t = alone.session(run_id="conv", provider="openai_chat")
    t.user("Tell Bob hi, three times")
    for n, call in enumerate(message):
        assert alone.call(call, run_id="conv", occurrence=n).status == "ok"
    assert _nodes(alone, "conv") == _nodes(by_session, "conv") and len(_nodes(alone, "conv")) == 3
    by_session.close()
    alone.close()


def test_a_new_turn_makes_the_identical_writes_new_actions() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    s = rt.session(run_id="conv", provider="openai_chat")
    for words in ("Tell Bob hi, twice", "And twice more"):
        s.user(words)
        for n in range(2):
            obs = rt.call(_call(f"c{n}", SEND), run_id="conv", occurrence=n)
            assert "replayed" not in obs.diagnostics
    assert mailed == ["bob"] * 4
    rt.close()


def test_an_occurrence_given_with_a_node_id_leaves_the_node_as_named() -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    run = rt.new_run()
    rt.call(_call("c1", SEND), run_id=run, node_id="mine")
    again = rt.call(_call("c2", SEND), run_id=run, node_id="mine", occurrence=3)
    assert again.diagnostics.get("replayed") is True and mailed == ["bob"]
    assert _nodes(rt, run)[0][0] == "mine"
    rt.close()


def test_a_read_with_an_occurrence_runs_as_it_does_without() -> None:
    rt = _runtime([])
    run = rt.new_run()
    obs = asyncio.run(rt.acall(_call("r1", {"box": "in"}, "inbox"), run_id=run, occurrence=2))
    assert obs.status == "ok" and obs.data == ["in"]
    rt.close()


_NOT_A_COUNT = st.one_of(
    st.integers(max_value=-1),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(bad=_NOT_A_COUNT, tool=st.sampled_from(["send", "inbox"]))
def test_an_occurrence_that_is_not_a_non_negative_int_raises_configuration_error(bad: Any, tool: str) -> None:
    mailed: list[str] = []
    rt = _runtime(mailed)
    run = rt.new_run()
    arguments = SEND if tool == "send" else {"box": "in"}
    rt.call(_call("warm", arguments, tool), run_id=run)  # a simple read then takes the precompiled path
    with pytest.raises(ConfigurationError, match="occurrence must be a non-negative int"):
        rt.call(_call("c1", arguments, tool), run_id=run, occurrence=bad)
    with pytest.raises(ConfigurationError, match="occurrence must be a non-negative int"):
        asyncio.run(rt.acall(_call("c2", arguments, tool), run_id=run, occurrence=bad))
    assert mailed == (["bob"] if tool == "send" else [])
    rt.close()


def test_occurrences_count_calls_as_the_validate_stage_does_after_normalizing() -> None:
    """Date-times spelled two ways and ``7.0`` for an integer name one action; reads, unknown
    tools, refused arguments and text that is not JSON count for none."""
    from actionspace.adapters._identical import occurrences  # the framework adapters' count

    rt = _runtime([])
    calls = [
        ("book", {"at": "2026-01-01T10:00:00Z", "seats": 2}),
        ("book", '{"seats": 2.0, "at": "2026-01-01T10:00Z"}'),
        ("book", {"at": "2026-01-01T10:00:00+00:00", "seats": 2}),
        ("book", {"at": "2026-01-01T10:00:00+02:00", "seats": 2}),
        ("inbox", {"box": "in"}),
        ("inbox", {"box": "in"}),
        ("nope", {}),
        ("nope", {}),
        ("send", {"to": "bob"}),
        ("send", {"to": "bob"}),
        ("send", "{not json"),
        ("send", "{not json"),
    ]
    counted = occurrences(rt, calls)
    assert [o.count for o in counted] == [0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert counted[0].action == counted[1].action == counted[2].action is not None
    assert [o.action for o in counted[3:]] == [None] * 9
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("book it")
    entries = [
        {"id": f"b{n}", "type": "function", "function": {"name": "book", "arguments": a}}
        for n, a in enumerate(
            ['{"at":"2026-01-01T10:00:00Z","seats":2}', '{"seats":2.0,"at":"2026-01-01T10:00Z"}']
        )
    ]
    turn = s.handle({"role": "assistant", "content": None, "tool_calls": entries})
    assert [o.status for o in turn.observations] == ["ok", "ok"]
    first, second = sorted(e.node_id for e in rt.ledger.list() if e.run_id == "conv")
    assert second == f"{first}/2"  # one action, proposed twice: as occurrences counts it
    rt.close()


_SPELLINGS: list[tuple[str, dict[str, Any]]] = [
    ("book", {"at": "2026-01-01T10:00:00Z", "seats": 2}),
    ("book", {"seats": 2.0, "at": "2026-01-01T10:00Z"}),
    ("book", {"at": "2026-01-01T12:00:00+02:00", "seats": 2}),
    ("book", {"at": "2026-01-01T10:00:00Z", "seats": 3}),
    ("send", SEND),
    ("send", {"text": "hi", "to": "bob"}),
    ("send", {"to": "ann", "text": "hi"}),
    ("inbox", {"box": "in"}),
]


@settings(max_examples=40, deadline=None)
@given(message=st.lists(st.sampled_from(_SPELLINGS), min_size=1, max_size=6))
def test_any_message_run_call_by_call_writes_the_ledger_rows_the_session_writes(
    message: list[tuple[str, dict[str, Any]]],
) -> None:
    """Whatever the message (identical calls spelled alike or apart, other tools between them),
    its calls run one by one with the occurrences the adapters count make the ledger rows — node
    and key — that a session makes of the whole message."""
    from actionspace.adapters._identical import occurrences

    by_session, alone = _runtime([]), _runtime([])
    s = by_session.session(run_id="conv", provider="openai_chat")
    s.user("do it")
    entries = [
        {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for n, (name, args) in enumerate(message)
    ]
    s.handle({"role": "assistant", "content": None, "tool_calls": entries})
    t = alone.session(run_id="conv", provider="openai_chat")
    t.user("do it")
    for n, ((name, args), where) in enumerate(zip(message, occurrences(alone, message), strict=True)):
        alone.call(_call(f"c{n}", args, name), run_id="conv", occurrence=where.count)
    assert _nodes(alone, "conv") == _nodes(by_session, "conv")
    by_session.close()
    alone.close()
