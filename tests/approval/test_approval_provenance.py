"""An approval request shows each argument's verified provenance, not the model's say-so."""

from __future__ import annotations

from typing import Any

from actionspace import Runtime
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.provenance_stage import ProvenanceStage

IBAN = "DE11111111111111111111"
PAGE = "Your bill: 42.50, due Friday."


def _runtime() -> Runtime:
    rules = {"send_money": {"amount": Param("user | tool_result", ask="untrusted")}}
    policy = NoSecretToExternalSink() & ArgumentPolicy(rules)
    stages = [ProvenanceStage()]
    rt = Runtime("memory://", recover_on_start=False, flow_policy=policy, stages=stages)

    def send_money(recipient: str, amount: float, note: str = "", memo: str = "") -> bool:
        return True

    def read_bill() -> dict[str, str]:
        return {"text": PAGE}

    rt.tool(effect="external")(send_money)
    rt.tool(effect="read", labels={"integrity": "untrusted"})(read_bill)
    return rt


def _held(rt: Runtime, run: str, **extra: Any) -> dict[str, str]:
    args = {"recipient": IBAN, "amount": 42.5, "memo": "rent"}
    obs = rt.call({"name": "send_money", "arguments": args}, run_id=run, **extra)
    assert obs.error is not None and obs.error.category == "needs_approval"
    request = rt.approvals.get(str(obs.error.details["request_id"]))
    assert request is not None and dict(request.provenance) == obs.error.details["provenance"]
    return dict(request.provenance)


def test_an_argument_bound_by_verified_sources_shows_that_provenance_in_the_request() -> None:
    rt = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay my bill to {IBAN}, memo rent")
    bill = rt.call({"name": "read_bill", "arguments": {}}, run_id=run)
    shown = _held(
        rt,
        run,
        sources={"recipient": ["user"], "amount": [bill.call_id], "memo": ["user", bill.call_id]},
    )
    assert shown == {
        "recipient": "user",
        "amount": f"tool_result:{bill.call_id}",
        "memo": f"user + tool_result:{bill.call_id}",
        "note": "default",
    }


def test_an_explicit_claim_wins_and_an_unbound_argument_stays_model_inferred() -> None:
    rt = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay my bill to {IBAN}")
    bill = rt.call({"name": "read_bill", "arguments": {}}, run_id=run)
    shown = _held(
        rt,
        run,
        provenance={"recipient": "user"},
        sources={"recipient": [bill.call_id, "user"], "amount": [bill.call_id]},
    )
    assert shown["recipient"] == "user"
    assert shown["amount"] == f"tool_result:{bill.call_id}"
    assert shown["memo"] == "model_inferred"
