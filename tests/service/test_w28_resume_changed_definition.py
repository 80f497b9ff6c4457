"""A held call resumed by another service process whose tool changed under the same version label
(another description) is not sent under the approval given for the tool as it was shown: it is held
again, on a request of its own bound to the tool as it is now."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from tests.service.apptools import TOKENS, bearer, serving

SHOWN = "Pay someone."
CHANGED = "Pay someone, and email the CFO a copy of the payment."


@contextmanager
def _app(store: str, description: str, paid: list[str]) -> Iterator[tuple[TestClient, Runtime, Any]]:
    rt = Runtime(store, principal=Principal(id="service", scopes=("external:*",)), recover_on_start=False)

    def send_payment(to: str, amount: int) -> dict[str, Any]:
        paid.append(to)
        return {"paid": to}

    send_payment.__doc__ = description
    rt.tool(effect="external", requires_approval=True)(send_payment)
    with serving(rt) as (client, app):
        yield client, rt, app.state.runner


def _pending(rt: Runtime, run_id: str) -> str:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        held = [r for r in rt.approvals.list("pending") if r.run_id == run_id]
        if held and any(
            e.kind == "approval_requested" and e.data.get("request_id") == held[0].id
            for e in rt.trace.events(run_id)
        ):
            return held[0].id
        time.sleep(0.02)
    raise TimeoutError("the payment was never held for approval")


def test_a_call_resumed_under_a_changed_tool_is_held_again(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    call = {"name": "send_payment", "arguments": {"to": "acct-BOB-42", "amount": 7}, "id": "p1"}
    paid: list[str] = []
    with _app(store, SHOWN, paid) as (client, rt, _):
        started = client.post(
            "/api/runs", json={"calls": [call], "run_id": "r"}, headers=bearer("agent-token")
        )
        assert started.status_code == 202
        shown_request = _pending(rt, "r")
    with _app(store, CHANGED, paid) as (client, rt, runner):
        decided = client.post(f"/api/approvals/{shown_request}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200
        resumed = runner.resumed(shown_request, "r")
        if resumed is not None:
            resumed.result(timeout=20)
        assert paid == [], "sent under an approval given for the tool as it was shown before"
        observed = [e.data for e in rt.trace.events("r") if e.kind == "observation"]
        assert observed and observed[-1]["category"] in ("needs_approval", "version_mismatch")

        shown = rt.approvals.get(shown_request)
        assert shown is not None and shown.status == "approved"  # not consumed by the changed tool
        # the agent, told to re-read the definition, proposes the same payment in the run again
        proposed = rt.call(call, run_id="r", node_id=shown.node_id, principal=TOKENS["agent-token"])
        assert proposed.error is not None and proposed.error.category == "needs_approval", proposed
        assert paid == [], "sent under an approval given for the tool as it was shown before"
        changed_request = str(proposed.error.details["request_id"])
        assert changed_request != shown_request
        assert proposed.error.details["definition_changed_since"] == shown_request

        decided = client.post(f"/api/approvals/{changed_request}/approve", headers=bearer("approver-token"))
        assert decided.status_code == 200
        again = runner.resumed(changed_request, "r")
        assert again is not None, "the call approved for the tool as it is now was not resumed"
        again.result(timeout=20)
        assert paid == ["acct-BOB-42"]
