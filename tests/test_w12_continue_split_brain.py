"""Two processes continuing one run at the same instant (split brain): the same write proposed
in both is sent once, and one pending approval decided in both (approved here, denied there) is
decided once, the run then following that one decision.

Each process is a real one on the same SQLite file or PostgreSQL database. Both start, open the
run and report ready; only then are both released at once (a file both wait for), so their steps
overlap as far as the machine lets them. What the tools really sent is counted in a file.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from actionspace import Runtime
from tests.proc import WAIT_FOR, at_once
from tests.proc import url as url  # the fixture

_PRELUDE = WAIT_FOR + textwrap.dedent(
    """
    import json, os, sys
    from actionspace import Runtime

    url, outbox, go = sys.argv[1], sys.argv[2], sys.argv[3]
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none", requires_approval=sys.argv[4] == "held")
    def pay(to: str, cents: int) -> str:
        "Pay someone."
        with open(outbox, "a") as f:
            f.write(json.dumps({"pay": to, "cents": cents, "pid": os.getpid()}) + "\\n")
        return "paid"

    def ready():
        print("ready", flush=True)
        wait_for(go)  # both processes are released by one file
    """
)

_PROPOSE = """
session = rt.session(run_id="conv", provider="openai_chat")
pay = {"name": "pay", "arguments": '{"to": "bob", "cents": 500}'}
call = {"id": "c1", "type": "function", "function": pay}
message = {"role": "assistant", "content": None, "tool_calls": [call]}
ready()
obs = session.handle(message).observations[0]
turn = session.turn
rt.close()
print(json.dumps({"answer": obs.error.category if obs.error else obs.status, "turn": turn}))
"""

_DECIDE = """
request_id, decision = sys.argv[5], sys.argv[6]
ready()
try:
    if decision == "approve":
        rt.approvals.approve(request_id, by="ana")
    else:
        rt.approvals.deny(request_id, by="cy", reason="not this month")
    answer = "decided"
except ValueError as exc:
    answer = "refused: " + str(exc)
rt.close()
print(json.dumps({"answer": answer}))
"""


def _at_once(script: str, tmp_path: Path, args: list[list[str]]) -> list[dict[str, Any]]:
    """Run ``_PRELUDE + script`` in one process per argument list, release them together once
    each reported ready, and return what each printed last."""
    return at_once(_PRELUDE + script, args, tmp_path / "go")


def _sent(outbox: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in outbox.read_text().splitlines()] if outbox.exists() else []


def test_the_same_write_proposed_in_two_processes_at_once_is_sent_once(url: str, tmp_path: Path) -> None:
    first = Runtime(url, recover_on_start=False)
    session = first.session(run_id="conv", provider="openai_chat")
    session.user("Pay Bob 5 dollars")
    turn = session.turn
    first.close()
    outbox = tmp_path / "sent.jsonl"

    answers = _at_once(_PROPOSE, tmp_path, [[url, str(outbox), str(tmp_path / "go"), "plain"]] * 2)

    assert [a["turn"] for a in answers] == [turn, turn]  # one turn, one logical action
    assert [(s["pay"], s["cents"]) for s in _sent(outbox)] == [("bob", 500)]
    assert sorted(a["answer"] for a in answers) in (["ok", "ok"], ["ok", "unknown_commit"])


def test_one_request_approved_and_denied_at_once_is_decided_once(url: str, tmp_path: Path) -> None:
    outbox = tmp_path / "sent.jsonl"
    rt = Runtime(url, recover_on_start=False)
    try:

        @rt.tool(effect="external", idempotency="none", requires_approval=True)
        def pay(to: str, cents: int) -> str:
            """Pay someone."""
            with open(outbox, "a") as f:
                f.write(json.dumps({"pay": to, "cents": cents}) + "\n")
            return "paid"

        call = {"name": "pay", "arguments": {"to": "bob", "cents": 500}}
        held = rt.call(call, run_id="conv", node_id="n1")
        assert held.error is not None and held.error.category == "needs_approval", held
        request_id = held.error.details["request_id"]

        base = [url, str(outbox), str(tmp_path / "go"), "held", request_id]
        approve, deny = _at_once(_DECIDE, tmp_path, [[*base, "approve"], [*base, "deny"]])

        assert sorted([approve["answer"] == "decided", deny["answer"] == "decided"]) == [False, True]
        loser = deny if approve["answer"] == "decided" else approve
        assert "not pending" in loser["answer"]
        request = rt.approvals.get(request_id)
        assert request is not None
        assert request.status == ("approved" if approve["answer"] == "decided" else "denied")
        decided = [e.data for e in rt.trace.events("conv") if e.kind == "approval_decided"]
        assert [d["status"] for d in decided] == [request.status]

        again = rt.call(call, run_id="conv", node_id="n1")
        if request.status == "approved":
            assert again.ok, again
            assert _sent(outbox) == [{"pay": "bob", "cents": 500}]
        else:
            assert again.error is not None and again.error.category == "permission_denied", again
            assert _sent(outbox) == []
    finally:
        rt.close()
