"""A scripted model driven as a live loop would drive it, one per provider shape, over SQLite.

Three calls at once with one malformed (none runs, each id answered once); the same three again
with new ids (they run: the payment is held for a person); a person denying the payment from
another process between turns; the model re-proposing both after a timeout with new ids (the
payment refused as denied, the note replayed, never written twice); an output cut mid-call (none
of its calls runs, the turn unfinished); a message over ``max_calls`` (refused and recorded);
the answer. Every call id of every message is answered exactly once, and the trace holds a
``model_output`` for every message that proposed calls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace.session import Session
from tests.proc import run_child
from tests.session.test_w18_scripted_loop import _SAYS, NOTE, PAY, _answered_once, _world

DENY = """
import json, sys
from actionspace import Runtime
url, request_id = sys.argv[1:3]
rt = Runtime(url, recover_on_start=False)
rt.approvals.deny(request_id, by="ops", reason="not this month")
rt.close()
print(json.dumps({"denied": request_id}), flush=True)
"""


def _malformed(provider: str, message: dict[str, Any], index: int) -> dict[str, Any]:
    """``message`` with its call number ``index`` malformed: JSON arguments cut (OpenAI), or an
    input that is no object (Anthropic)."""
    if provider == "openai_chat":
        function = message["choices"][0]["message"]["tool_calls"][index]["function"]
        function["arguments"] = function["arguments"][:7]
    elif provider == "openai_responses":
        calls = [item for item in message["output"] if item["type"] == "function_call"]
        calls[index]["arguments"] = calls[index]["arguments"][:7]
    else:
        uses = [block for block in message["content"] if block["type"] == "tool_use"]
        uses[index]["input"] = '{"text": "pai'
    return message


@pytest.mark.parametrize("provider", sorted(_SAYS))
def test_a_live_loop_through_a_malformed_call_a_denial_elsewhere_timeouts_and_a_cut(
    tmp_path: Path, provider: Any
) -> None:
    url, says = f"sqlite:///{tmp_path / 'a.db'}", _SAYS[provider]
    paid: list[str] = []
    notes: list[str] = []
    rt = _world(url, paid, notes)
    try:
        s: Session = rt.session(run_id="conv", provider=provider)
        s.user("Pay bob 5 euros, note it twice")
        three = [("a1", "pay", PAY), ("a2", "note", NOTE), ("a3", "note", {"text": "second"})]
        bad = s.handle(_malformed(provider, says(None, three), 1))
        _answered_once(provider, bad, ["a1", "a2", "a3"])
        assert {o.error.category for o in bad.observations if o.error} == {"parse_error"}
        assert paid == [] and notes == []

        ran = s.handle(
            says(None, [("b1", "pay", PAY), ("b2", "note", NOTE), ("b3", "note", {"text": "second"})])
        )
        _answered_once(provider, ran, ["b1", "b2", "b3"])
        held = ran.observations[0]
        assert held.error is not None and held.error.category == "needs_approval"
        assert [o.ok for o in ran.observations[1:]] == [True, True] and notes == ["paid bob", "second"]

        # between turns a person denies the payment from another process
        done = run_child(DENY, url, held.error.details["request_id"])
        assert done["denied"] == held.error.details["request_id"]

        # the model timed out and proposes the payment and the first note again, with new ids
        again = s.handle(says(None, [("c1", "pay", PAY), ("c2", "note", NOTE)]))
        _answered_once(provider, again, ["c1", "c2"])
        refused, noted = again.observations
        assert refused.error is not None and refused.error.category == "permission_denied"
        assert "not this month" in refused.error.message
        assert noted.ok and noted.diagnostics.get("replayed") is True
        assert paid == [] and notes == ["paid bob", "second"]

        cut = s.handle(says(None, [("d1", "note", {"text": "third"}), ("d2", "pay", PAY)], cut=True))
        _answered_once(provider, cut, ["d1", "d2"])
        assert cut.unfinished and not cut.done
        assert {o.error.category for o in cut.observations if o.error} == {"parse_error"}

        s.max_calls = 2
        over = s.handle(says(None, [(f"e{i}", "note", {"text": f"n{i}"}) for i in range(3)]))
        _answered_once(provider, over, ["e0", "e1", "e2"])
        assert {o.error.category for o in over.observations if o.error} == {"budget_exceeded"}
        assert paid == [] and notes == ["paid bob", "second"]

        answer = s.handle(says("I could not pay bob: the payment was denied.", []))
        assert answer.done and answer.observations == ()
        events = rt.trace.events("conv")
        assert sum(e.kind == "model_output" for e in events) == 5  # each of the five that proposed calls
        refusals = [
            e.call_id
            for e in events
            if e.kind == "observation" and e.data.get("category") == "budget_exceeded"
        ]
        assert refusals == ["e0", "e1", "e2"]
        assert json.dumps([e.data for e in events], default=str)  # the trace reads back whole
    finally:
        rt.close()
