"""Post-conditions on a tool (``verify=[...]``) and the completion level its evidence reaches."""

from __future__ import annotations

import time
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ToolDefinitionError
from actionspace.execution.result import ToolResult
from actionspace.types import Observation, Provenance
from actionspace.validation.verdicts import Rejected
from actionspace.verify import fresh, read_back


class Inbox:
    """A delivery target that can drop or garble what it was sent (fault injection)."""

    def __init__(self, *, drop: bool = False, garble: bool = False) -> None:
        self.messages: dict[str, dict[str, Any]] = {}
        self.drop, self.garble = drop, garble

    def send(self, to: str, body: str) -> dict[str, Any]:
        mid = f"m{len(self.messages) + 1}"
        if not self.drop:
            self.messages[mid] = {"to": to, "body": body.upper() if self.garble else body}
        return {"id": mid}

    def read(self, args: Any, data: Any) -> dict[str, Any] | None:
        return self.messages.get(data["id"])


def _runtime(inbox: Inbox, **contract: Any) -> Runtime:
    rt = Runtime()
    rt.add_tool(
        name="send",
        input_schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"],
        },
        fn=inbox.send,
        effect="write",
        **contract,
    )
    return rt


CALL = {"name": "send", "arguments": {"to": "ops", "body": "hello"}}


def test_a_read_back_proves_delivery_and_the_observation_says_delivered() -> None:
    inbox = Inbox()
    rt = _runtime(inbox, verify=[read_back(fields=["to", "body"], read=inbox.read)], completion="delivered")
    obs = rt.call(CALL, run_id="delivery")
    assert obs.status == "ok", obs.error
    assert obs.diagnostics["completion"] == {"reached": "delivered", "required": "delivered"}
    verified = [e.data for e in rt.trace.events("delivery") if e.kind == "verified"]
    assert verified == [{"tool": "send@1", "verifier": "read_back", "verdict": "accepted"}]


@pytest.mark.parametrize(
    ("fault", "reason"), [("drop", "not_found_on_read_back"), ("garble", "read_back_mismatch")]
)
def test_a_failed_read_back_is_an_error_naming_the_verifier(fault: str, reason: str) -> None:
    inbox = Inbox(**{fault: True})
    rt = _runtime(inbox, verify=[read_back(fields=["to", "body"], read=inbox.read)], completion="delivered")
    obs = rt.call(CALL)
    assert obs.status == "error" and obs.error is not None
    assert obs.error.details["verifier"] == "read_back"
    assert obs.error.details["reason"] == reason
    assert obs.diagnostics["completion"]["reached"] == "accepted"


def test_accepted_is_reported_without_a_read_back() -> None:
    inbox = Inbox(drop=True)
    rt = _runtime(inbox, completion="accepted")
    obs = rt.call(CALL)
    assert obs.status == "ok"
    assert obs.diagnostics["completion"] == {"reached": "accepted", "required": "accepted"}


def test_an_unknown_commit_reached_only_sent() -> None:
    rt = Runtime()

    def send(to: str) -> None:
        raise TimeoutError("lost response")

    rt.add_tool(
        name="send",
        input_schema={"type": "object", "properties": {"to": {"type": "string"}}},
        fn=send,
        effect="external",
        completion="sent",
    )
    obs = rt.call({"name": "send", "arguments": {"to": "x"}})
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert obs.diagnostics["completion"]["reached"] == "sent"


def test_delivered_without_a_read_back_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="delivered"):
        _runtime(Inbox(), completion="delivered")


def test_a_fresh_post_condition_rejects_a_stale_answer_from_a_read_tool() -> None:
    rt = Runtime()

    @rt.tool(effect="read", verify=[fresh(max_age_s=60)])
    def balance(account: str) -> ToolResult:
        return ToolResult(data={"balance": 3})

    ok = rt.call({"name": "balance", "arguments": {"account": "a"}})
    assert ok.status == "ok", ok.error
    stale = Observation(
        call_id="c",
        tool="balance",
        status="ok",
        data={},
        provenance=Provenance(source="cache", fetched_at=time.time() - 3600),
    )
    verdict = fresh(max_age_s=60)(stale)
    assert isinstance(verdict, Rejected)
    assert verdict.error.details["reason"] == "stale_observation"


def test_a_plain_callable_is_a_post_condition_too() -> None:
    rt = Runtime()

    def positive(obs: Observation) -> Any:
        from actionspace.errors import ActionError
        from actionspace.validation.verdicts import ACCEPTED, Rejected

        return ACCEPTED if obs.data > 0 else Rejected(ActionError.of("permanent", "not positive"))

    @rt.tool(effect="none", verify=[positive])
    def double(n: int) -> int:
        return 2 * n

    assert rt.call({"name": "double", "arguments": {"n": 2}}).status == "ok"
    bad = rt.call({"name": "double", "arguments": {"n": -2}})
    assert bad.error is not None and bad.error.details["verifier"] == "positive"
