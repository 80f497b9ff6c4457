"""A trimmed result invites a ``read_artifact`` call only where that call would be allowed."""

from __future__ import annotations

import json

from actionspace import Principal, Runtime
from actionspace.discovery import render_result

BIG = "\n".join(f"salary row {i}: " + "9" * 60 for i in range(2000))


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(name="payroll", effect="read", scopes=["read:payroll"])
    def payroll(month: str) -> str:
        """Read the payroll export."""
        return BIG

    return rt


def _call(call_id: str, name: str, arguments: dict[str, object]) -> dict[str, object]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _offered(tools: object) -> list[str]:
    return [t["function"]["name"] for t in tools]  # type: ignore[attr-defined]


def test_a_principal_who_may_not_read_artifacts_is_not_told_to_call_read_artifact() -> None:
    rt = _runtime()
    session = rt.session(
        run_id="r1", provider="openai_chat", principal=Principal(id="hr", scopes=("read:payroll",))
    )
    session.user("payroll please")
    turn = session.handle(_call("c1", "payroll", {"month": "2026-11"}))
    content = json.loads(turn.messages[0]["content"])
    assert content["complete"] is False and content["artifact_ref"].startswith("artifact://sha256/")
    assert "read_artifact" not in _offered(session.tools())
    assert "call read_artifact" not in content["hint"]
    assert "cannot be read" in content["hint"]


def test_a_principal_who_may_read_artifacts_is_offered_the_read_and_it_works() -> None:
    rt = _runtime()
    alice = Principal(id="hr", scopes=("read:payroll", "read:read_artifact"))
    session = rt.session(run_id="r1", provider="openai_chat", principal=alice)
    session.user("payroll please")
    turn = session.handle(_call("c1", "payroll", {"month": "2026-11"}))
    content = json.loads(turn.messages[0]["content"])
    assert "call read_artifact" in content["hint"]
    assert "read_artifact" in _offered(session.tools())
    read = session.handle(_call("c2", "read_artifact", {"ref": content["artifact_ref"], "length": 40}))
    assert read.observations[0].ok and read.observations[0].data["text"] == json.dumps(BIG)[:40]


def test_render_result_says_the_rest_cannot_be_read_when_read_artifact_is_not_offered() -> None:
    rt = _runtime()
    obs = rt.call(
        {"name": "payroll", "arguments": {"month": "2026-11"}}, principal=Principal(id="hr", scopes=("*",))
    )
    assert obs.artifact_ref is not None
    offered = json.loads(render_result(obs, "openai_chat")["content"])
    withheld = json.loads(render_result(obs, "openai_chat", read_artifact=False)["content"])
    assert "call read_artifact" in offered["hint"] and "call read_artifact" not in withheld["hint"]
    assert withheld["artifact_ref"] == offered["artifact_ref"] == obs.artifact_ref
