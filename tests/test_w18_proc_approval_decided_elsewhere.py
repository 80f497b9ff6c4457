"""An approval decided in another process while the process that asked for it waits, its runtime
open: the waiting process sees the decision in the store and the model's re-proposal of the held
write (the same tool and arguments, no node id; through ``rt.call`` or a session's turn) follows
it: approved, the write is sent once, and a further re-proposal is replayed; denied, nothing is
sent, then or later.

The waiting process is a real child on the same SQLite file or PostgreSQL schema; it looks at the
request until it is decided (it never learns of the decision any other way). The decision is taken
here, in the test's process. The payment service counts what it received in a file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actionspace import Runtime
from tests.proc import Child, sent
from tests.proc import url as url  # the fixture

WAITING = """
import json, os, sys, time
from actionspace import Runtime, ToolCall

url, outbox, via = sys.argv[1:4]
rt = Runtime(url, recover_on_start=False)

@rt.tool(effect="external", idempotency="none", requires_approval=True)
def pay(to: str, cents: int) -> str:
    "Pay someone."
    with open(outbox, "a") as f:
        f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\\n")
    return "paid"

session = rt.session(run_id="conv", provider="openai_chat") if via == "session" else None
if session is not None:
    session.user("Pay Bob 5 dollars")

def propose(call_id):
    if session is None:
        call = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id=call_id)
        return rt.call(call, run_id="conv")
    function = {"name": "pay", "arguments": json.dumps({"to": "bob", "cents": 500})}
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": call_id, "type": "function", "function": function}]}
    return session.handle(message).observations[0]

def answer(obs):
    return obs.error.category if obs.error else obs.status

held = propose("c1")
assert held.error is not None and held.error.category == "needs_approval", held
request_id = held.error.details["request_id"]
print(json.dumps({"request": request_id, "answer": answer(held)}), flush=True)
deadline = time.monotonic() + 120
while rt.approvals.get(request_id).status == "pending":  # waits: the decision is taken elsewhere
    assert time.monotonic() < deadline, "never decided"
    time.sleep(0.01)
print(rt.approvals.get(request_id).status, flush=True)
first, again = propose("c2"), propose("c3")
rt.close()
print(json.dumps({"answers": [answer(first), answer(again)],
                  "replayed": bool(again.diagnostics.get("replayed"))}))
"""


@pytest.mark.parametrize("via", ["call", "session"])
@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_decision_taken_in_another_process_is_followed_by_the_waiting_one(
    url: str, tmp_path: Path, via: str, decision: str
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    with Child(WAITING, url, str(outbox), via) as waiting:
        held = json.loads(waiting.line())
        assert held["answer"] == "needs_approval"
        deciding = Runtime(url, recover_on_start=False)
        try:
            if decision == "approve":
                deciding.approvals.approve(held["request"], by="ana", reason="fine")
            else:
                deciding.approvals.deny(held["request"], by="ana", reason="not this month")
        finally:
            deciding.close()
        waiting.expect("approved" if decision == "approve" else "denied")
        result = waiting.result()
    if decision == "approve":
        assert result == {"answers": ["ok", "ok"], "replayed": True}, result
        assert [(p["to"], p["cents"]) for p in sent(outbox)] == [("bob", 500)]
    else:
        assert result["answers"] == ["permission_denied", "permission_denied"], result
        assert sent(outbox) == []
