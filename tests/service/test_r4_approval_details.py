"""A call held for approval tells the model who it waits for, never what that principal may do:
the proposer's scopes stay in the approval request (a resumed call runs as that principal) and
out of the ``needs_approval`` error the model reads."""

from __future__ import annotations

import json
from typing import Any

from actionspace import Principal, Runtime
from actionspace.policy.flow_policies import Ask, Decision, FlowPolicy, FlowRequest
from tests.service.apptools import World, build_runtime

SECRET_SCOPES = ("external:*", "write:*", "read:*", "vault:open-the-safe")


def _scopes_in(value: Any) -> bool:
    return "vault:open-the-safe" in json.dumps(value, default=str)


def test_a_held_calls_error_names_its_proposer_without_the_proposers_scopes() -> None:
    rt, approvals = build_runtime(World())
    try:
        who = Principal(id="pat", scopes=SECRET_SCOPES, tenant="acme")
        pay = {"name": "send_payment", "arguments": {"to": "acct-1", "amount": 5}}
        obs = rt.call(pay, run_id="held", principal=who)
        assert obs.error is not None and obs.error.category == "needs_approval"
        shown = obs.error.details["proposed_by"]
        assert shown == {"id": "pat", "tenant": "acme"}
        assert not _scopes_in(obs.to_dict())
        again = rt.call(pay, run_id="held", principal=who)  # still pending: found, not filed anew
        assert again.error is not None and not _scopes_in(again.to_dict())
        (request,) = approvals.requests
        stored = rt.approvals.get(request.id)
        assert stored is not None
        assert stored.details["proposed_by"] == {"id": "pat", "scopes": list(SECRET_SCOPES), "tenant": "acme"}
        assert not any(_scopes_in(e.data) for e in rt.trace.events("held") if e.kind == "observation")
    finally:
        rt.close()


class _AskAlways(FlowPolicy):
    """A flow policy that asks a person before every call."""

    def check(self, request: FlowRequest) -> Decision:
        return Ask("a person looks at every payment", details={"rule": "ask-always"})


def test_a_call_held_by_a_flow_rule_shows_no_scopes_either() -> None:
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("*",)), recover_on_start=False)
    try:

        @rt.tool(effect="external", writes=["account:{to}"])
        def pay(to: str) -> dict[str, str]:
            """Pay.

            Args:
                to: Recipient.
            """
            return {"to": to}

        rt.flow_policy = _AskAlways()
        who = Principal(id="pat", scopes=SECRET_SCOPES)
        obs = rt.call({"name": "pay", "arguments": {"to": "x"}}, run_id="flow", principal=who)
        assert obs.error is not None and obs.error.category == "needs_approval"
        assert not _scopes_in(obs.to_dict())
        (stored,) = rt.approvals.list()
        assert stored.details["proposed_by"]["scopes"] == list(SECRET_SCOPES)
    finally:
        rt.close()
