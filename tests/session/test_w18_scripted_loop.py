"""A whole agent loop against scripted models, one per provider, over a SQLite file.

The model is a plain function from the step of its script to the message the provider would send
(OpenAI chat, Responses, Anthropic): text and calls interleaved, calls re-proposed with new ids
and no node id after a timeout, an output the provider cut off. Between its turns the world
moves: a person approves the held payment from a console (another runtime on the file) and the
agent's process restarts (a new runtime on the same store). Whatever happens, the payment is sent
once, the note written once, and every call id of every message answered exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import Session
from tests.session.w47_world import answered_ids

Call = tuple[str, str, dict[str, Any]]
"""(call id, tool, arguments)."""


def _chat(text: str | None, calls: list[Call], cut: bool = False) -> dict[str, Any]:
    entries: list[dict[str, Any]] = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for cid, name, args in calls
    ]
    if cut:  # the last call's JSON stops where the token limit fell
        function: dict[str, str] = entries[-1]["function"]
        function["arguments"] = function["arguments"][:9]
    message = {"role": "assistant", "content": text, "tool_calls": entries or None}
    return {"choices": [{"finish_reason": "length" if cut else "tool_calls", "message": message}]}


def _responses(text: str | None, calls: list[Call], cut: bool = False) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if text:
        output.append(
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        )
    for cid, name, args in calls:
        output.append({"type": "function_call", "call_id": cid, "name": name, "arguments": json.dumps(args)})
        if text:  # text between the calls too
            output.append(
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "…"}]}
            )
    if cut:
        output[-1 if not text else -2]["arguments"] = output[-1 if not text else -2]["arguments"][:9]
        return {
            "object": "response",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
            "output": output,
        }
    return {"object": "response", "status": "completed", "output": output}


def _anthropic(text: str | None, calls: list[Call], cut: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for cid, name, args in calls:
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "tool_use", "id": cid, "name": name, "input": args})
    if not calls and text:
        blocks.append({"type": "text", "text": text})
    stop = "max_tokens" if cut else ("tool_use" if calls else "end_turn")
    return {"role": "assistant", "content": blocks, "stop_reason": stop}


_SAYS: dict[str, Callable[..., dict[str, Any]]] = {
    "openai_chat": _chat,
    "openai_responses": _responses,
    "anthropic": _anthropic,
}
PAY = {"to": "bob", "cents": 500}
NOTE = {"text": "paid bob"}


def _world(url: str, paid: list[str], notes: list[str]) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none", requires_approval=True, writes=["payee:{to}"])
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    @rt.tool(effect="write", writes=["note:{text}"])
    def note(text: str) -> str:
        """Write a note."""
        notes.append(text)
        return "noted"

    return rt


def _answered_once(provider: str, turn: Any, ids: list[str]) -> None:
    assert [o.call_id for o in turn.observations] == ids
    assert answered_ids(provider, turn.messages) == ids


@pytest.mark.parametrize("provider", sorted(_SAYS))
def test_a_scripted_model_pays_once_through_approval_restart_timeouts_and_a_cut_off(
    tmp_path: Path, provider: Any
) -> None:
    url, says = f"sqlite:///{tmp_path / 'a.db'}", _SAYS[provider]
    paid: list[str] = []
    notes: list[str] = []
    rt = _world(url, paid, notes)
    s: Session = rt.session(run_id="conv", provider=provider)
    s.user("Pay bob 5 euros and note it")

    first = s.handle(says("On it.", [("a1", "pay", PAY), ("a2", "note", NOTE)]))  # text and calls interleaved
    _answered_once(provider, first, ["a1", "a2"])
    held, noted = first.observations
    assert held.error is not None and held.error.category == "needs_approval"
    assert noted.ok and notes == ["paid bob"] and paid == []
    assert first.content is not None and "On it." in first.content

    console = _world(url, [], [])  # a person approves from another runtime on the file
    console.approvals.approve(held.error.details["request_id"], by="ops")
    console.close()
    rt.close()  # the agent's process restarts between the two steps
    rt = _world(url, paid, notes)
    s = rt.session(run_id="conv", provider=provider)
    assert s.turn == 1

    # the model timed out waiting and proposes both again: new ids, no node id
    again = s.handle(says(None, [("b1", "pay", PAY), ("b2", "note", NOTE)]))
    _answered_once(provider, again, ["b1", "b2"])
    assert [o.ok for o in again.observations] == [True, True], again.observations
    assert again.observations[1].diagnostics.get("replayed") is True
    assert paid == ["bob"] and notes == ["paid bob"]

    once_more = s.handle(says(None, [("c1", "pay", PAY), ("c2", "note", NOTE)]))  # and once more
    _answered_once(provider, once_more, ["c1", "c2"])
    assert [o.diagnostics.get("replayed") for o in once_more.observations] == [True, True]
    assert paid == ["bob"] and notes == ["paid bob"]

    cut = s.handle(
        says(None, [("d1", "note", {"text": "a"}), ("d2", "pay", {"to": "eve", "cents": 1})], cut=True)
    )
    _answered_once(provider, cut, ["d1", "d2"])  # none of a cut output's calls runs
    assert {o.error.category for o in cut.observations if o.error} == {"parse_error"}
    assert len([o for o in cut.observations if o.error]) == 2
    assert paid == ["bob"] and notes == ["paid bob"]

    done = s.handle(says("Paid bob 5 euros and noted it.", []))
    assert done.done and done.observations == () and done.content == "Paid bob 5 euros and noted it."
    rt.close()
