"""What the model is told of a message whose run state could not be saved.

A call's result is withheld (``transient``) while the run's state that labels it is not saved.
Before, every call of such a message was answered ``transient`` ("ask again"), even a write whose
ledger entry says ``unknown_commit``: asked again it is answered ``unknown_commit``, so the model
was told to retry a write whose effect may have happened, and the ledger then contradicted it.
An observation that carries no tool output (an ``unknown_commit``, an error raised before the
tool is asked) withholds nothing: now it is told as it is, and its trace ``observation`` event is
its own, with nothing under ``withheld``; a result with tool output stays withheld. A scripted
model sends three calls at once (a write that times out, a read, a call missing an argument),
re-proposes the write after the timeout, repeats an id, stops mid-output, and once the store
answers again asks for the write a third time.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import Session, Turn
from actionspace.testing import ScriptedPolicy
from tests.store_faults import down


def _entry(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _message(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


PAY = {"to": "bob", "cents": 5}
MODEL = [
    _message(  # three calls at once
        _entry("c1", "pay", PAY), _entry("c2", "look", {"q": "ledger"}), _entry("c3", "pay", {"to": "bob"})
    ),
    _message(_entry("c4", "pay", PAY)),  # re-proposed after the timeout, the store still down
    _message(_entry("d1", "look", {"q": "a"}), _entry("d1", "look", {"q": "b"})),  # one id twice
    {  # stopped mid-output
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": _message(
                    _entry("e1", "look", {"q": "a"}),
                    {"id": "e2", "type": "function", "function": {"name": "pay", "arguments": '{"to": "b'}},
                ),
            }
        ]
    },
    _message(_entry("c5", "pay", PAY)),  # and again once the store answers
]


@pytest.fixture
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Runtime, list[str]]]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'a.db'}"
    rt = Runtime(url, recover_on_start=False)
    paid: list[str] = []
    answer = threading.Event()  # never set while the test runs: the payment's answer is lost

    @rt.tool(effect="external", idempotency="none", writes=["payee:{to}"], timeout_s=0.3)
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        answer.wait(30)
        return f"paid {to}"

    @rt.tool(effect="read", reads=["book:{q}"])
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    yield rt, paid
    answer.set()
    rt.close()


def _saves_fail(rt: Runtime) -> Callable[[], None]:
    store = rt.engine.runs.run_states
    undo = [down(store, m) for m in ("save", "save_later") if hasattr(store, m)]

    def put_back() -> None:
        for u in undo:
            u()

    return put_back


def _handled(s: Session, raw: Any, mode: str) -> Turn:
    return s.handle(raw) if mode == "sync" else asyncio.run(s.ahandle(raw))


def _told(turn: Turn) -> list[tuple[str, str | None]]:
    return [(o.call_id, o.error.category if o.error else None) for o in turn.observations]


def _traced(rt: Runtime, call_id: str) -> dict[str, Any]:
    [data] = [e.data for e in rt.trace.events("conv") if e.kind == "observation" and e.call_id == call_id]
    return dict(data)


@pytest.mark.parametrize("world", ["memory", "sqlite"], indirect=True)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_unknown_commit_is_told_as_it_is_when_the_run_state_was_not_saved(
    world: tuple[Runtime, list[str]], mode: str
) -> None:
    rt, paid = world
    model = ScriptedPolicy(MODEL)
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("pay bob 5 cents and look up the ledger")
    put_back = _saves_fail(rt)
    try:
        first = _handled(s, model(), mode)
        again = _handled(s, model(), mode)
        twice = _handled(s, model(), mode)
        cut = _handled(s, model(), mode)
    finally:
        put_back()
    assert _told(first) == [("c1", "unknown_commit"), ("c2", "transient"), ("c3", "invalid_arguments")]
    assert _told(again) == [("c4", "unknown_commit")]
    assert _told(twice) == [("d1", "parse_error"), ("d1", "parse_error")]  # none ran: nothing withheld
    assert _told(cut) == [("e1", "parse_error"), ("e2", "parse_error")]
    assert [m["tool_call_id"] for m in twice.messages] == ["d1"]
    [entry] = [e for e in rt.ledger.list() if e.node_id]
    key = first.observations[0].error.details["idempotency_key"]  # type: ignore[union-attr]
    assert entry.key == key and again.observations[0].error.details["idempotency_key"] == key  # type: ignore[union-attr]
    said = json.dumps(first.messages)
    assert "unknown_commit" in said and "invalid_arguments" in said
    # the trace holds what the model was told: its own event for what withholds nothing
    for call_id, category in (
        ("c1", "unknown_commit"),
        ("c3", "invalid_arguments"),
        ("c4", "unknown_commit"),
        ("d1", "parse_error"),
        ("e2", "parse_error"),
    ):
        data = _traced(rt, call_id)
        assert data["category"] == category and "withheld" not in data, (call_id, data)
    looked = _traced(rt, "c2")
    assert looked["category"] == "transient" and looked["withheld"]["status"] == "ok"
    third = _handled(s, model(), mode)  # the store answers: the ledger says what the model was told
    assert _told(third) == [("c5", "unknown_commit")]
    assert paid == ["bob"]  # sent once
