"""Progressive disclosure: short definitions first, describe on demand, undescribed tools uncallable."""

from __future__ import annotations

import pytest

from actionspace import Runtime, ToolCall
from actionspace.discovery import DESCRIBE_TOOL, DiscoveryConfig
from actionspace.errors import UnknownToolError


def _runtime(**config: object) -> Runtime:
    rt = Runtime("memory://", discovery=DiscoveryConfig(disclosure=True, **config))  # type: ignore[arg-type]

    @rt.tool(effect="external", examples=({"to": "ana@example.com", "body": "hi"},))
    def send_email(to: str, body: str) -> str:
        """Send an email.

        Args:
            to: Recipient address.
            body: Plain-text body.
        """
        return f"sent to {to}"

    @rt.tool(effect="read")
    def read_inbox(limit: int = 10) -> list[str]:
        """Read the newest messages of the inbox."""
        return ["hello"][:limit]

    return rt


def test_a_disclosure_offer_shows_names_summaries_and_risk_but_no_schema() -> None:
    rt = _runtime()
    run = rt.new_run()
    offered = rt.offer(run_id=run)
    assert [d["name"] for d in offered] == ["send_email", "read_inbox", DESCRIBE_TOOL]
    email = offered[0]
    assert email == {
        "name": "send_email",
        "version": "1",
        "summary": "Send an email.",
        "effect": "external",
        "risk": "high",
        "reversible": False,
    }
    assert all("input_schema" not in d for d in offered[:-1])
    assert offered[-1]["input_schema"]["required"] == ["tool"]  # describe_tool itself comes whole


def test_a_tool_never_described_in_the_run_cannot_be_called() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    obs = rt.call(ToolCall(name="send_email", arguments={"to": "a@b.c", "body": "x"}), run_id=run)
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert obs.error.recovery == ("describe_tool", "choose_offered_tool")
    assert obs.error.details["describe_with"] == DESCRIBE_TOOL
    assert not [e for e in rt.trace.events(run) if e.kind == "dispatched"]


def test_the_model_describes_a_tool_then_calls_it_and_the_trace_records_both() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    definition = rt.call(ToolCall(name=DESCRIBE_TOOL, arguments={"tool": "send_email"}), run_id=run)
    assert definition.status == "ok"
    assert definition.data["input_schema"]["required"] == ["to", "body"]
    assert definition.data["examples"] == [{"to": "ana@example.com", "body": "hi"}]
    sent = rt.call(ToolCall(name="send_email", arguments={"to": "a@b.c", "body": "x"}), run_id=run)
    assert sent.data == "sent to a@b.c"
    described = [e.data for e in rt.trace.events(run) if e.kind == "described"]
    assert described == [
        {
            "tool": "send_email",
            "version": "1",
            "schema_hash": rt.describe("send_email")["schema_hash"],
            "via": "model",
        }
    ]
    still_hidden = rt.call(ToolCall(name="read_inbox", arguments={}), run_id=run)
    assert still_hidden.error is not None and still_hidden.error.category == "unknown_tool"


def test_the_host_describes_for_the_model_and_a_new_run_starts_undescribed() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    full = rt.describe("read_inbox", run_id=run)
    assert full["input_schema"]["properties"]["limit"]["default"] == 10
    assert rt.call(ToolCall(name="read_inbox", arguments={}), run_id=run).data == ["hello"]
    other = rt.new_run()
    rt.offer(run_id=other)
    obs = rt.call(ToolCall(name="read_inbox", arguments={}), run_id=other)
    assert obs.error is not None and obs.error.category == "unknown_tool"


def test_describing_a_tool_that_was_not_offered_is_refused() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(["read_inbox"], run_id=run)
    with pytest.raises(UnknownToolError):
        rt.describe("send_email", run_id=run)
    obs = rt.call(ToolCall(name=DESCRIBE_TOOL, arguments={"tool": "send_email"}), run_id=run)
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert not [e for e in rt.trace.events(run) if e.kind == "described"]


def test_without_disclosure_offers_carry_full_definitions_and_no_describe_tool() -> None:
    rt = _runtime()
    run = rt.new_run()
    offered = rt.offer(run_id=run, disclosure=False)
    assert [d["name"] for d in offered] == ["send_email", "read_inbox"]
    assert offered[0] == rt.describe("send_email")
    assert rt.call(ToolCall(name="read_inbox", arguments={}), run_id=run).status == "ok"


def test_the_describe_tool_can_be_turned_off() -> None:
    rt = _runtime(describe_tool=False)
    run = rt.new_run()
    assert DESCRIBE_TOOL not in [d["name"] for d in rt.offer(run_id=run)]
    rt.describe("send_email", run_id=run)
    assert rt.call(ToolCall(name="send_email", arguments={"to": "x@y.z", "body": ""}), run_id=run).ok


def test_a_new_version_offered_in_the_run_must_be_described_again() -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    rt.describe("read_inbox", run_id=run)
    rt.offer(run_id=run)  # same versions: what was read stays read
    assert rt.call(ToolCall(name="read_inbox", arguments={}), run_id=run).ok
    rt.add_tool(
        name="read_inbox",
        version="2",
        input_schema={"type": "object", "properties": {"folder": {"type": "string"}}},
        fn=lambda folder="inbox": [folder],
        effect="read",
    )
    rt.offer(run_id=run)
    obs = rt.call(ToolCall(name="read_inbox", arguments={"folder": "sent"}), run_id=run)
    assert obs.error is not None and obs.error.category == "unknown_tool"
    assert rt.describe("read_inbox", run_id=run)["version"] == "2"
    assert rt.call(ToolCall(name="read_inbox", arguments={"folder": "sent"}), run_id=run).data == ["sent"]
