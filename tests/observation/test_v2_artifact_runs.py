"""read_artifact through the Runtime: a ref of another run or of a tool the principal may not call."""

from __future__ import annotations

import json

from actionspace import Principal, Runtime
from actionspace.discovery import read_artifact_tool

BIG = "\n".join(f"salary row {i}: " + "9" * 60 for i in range(2000))
HR = Principal(id="hr", scopes=("read:payroll", "read:read_artifact"))
CLERK = Principal(id="clerk", scopes=("read:read_artifact",))


def _runtime() -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(name="payroll", effect="read", scopes=["read:payroll"])
    def payroll(month: str) -> str:
        """Read the payroll export."""
        return BIG

    rt.register(read_artifact_tool(rt.artifacts))
    return rt


def _payroll_ref(rt: Runtime, run_id: str) -> str:
    obs = rt.call({"name": "payroll", "arguments": {"month": "2026-11"}}, run_id=run_id, principal=HR)
    assert obs.ok and obs.artifact_ref is not None
    return obs.artifact_ref


def test_a_ref_shown_in_another_run_is_not_readable_through_the_runtime() -> None:
    rt = _runtime()
    ref = _payroll_ref(rt, "run-a")
    obs = rt.call({"name": "read_artifact", "arguments": {"ref": ref}}, run_id="run-b", principal=CLERK)
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert "salary" not in json.dumps(obs.to_dict())


def test_a_principal_not_allowed_the_producer_cannot_read_its_artifact_in_the_same_run() -> None:
    rt = _runtime()
    ref = _payroll_ref(rt, "run-a")
    obs = rt.call({"name": "read_artifact", "arguments": {"ref": ref}}, run_id="run-a", principal=CLERK)
    assert obs.error is not None and obs.error.category == "permission_denied"
    assert "salary" not in json.dumps(obs.to_dict())


def test_the_run_that_was_shown_the_artifact_reads_it_back() -> None:
    rt = _runtime()
    ref = _payroll_ref(rt, "run-a")
    obs = rt.call(
        {"name": "read_artifact", "arguments": {"ref": ref, "length": 50}}, run_id="run-a", principal=HR
    )
    assert obs.ok and obs.data["text"] == json.dumps(BIG)[:50]


def test_a_session_over_a_runtime_that_registered_the_tool_itself_still_gates_reads() -> None:
    rt = _runtime()
    ref = _payroll_ref(rt, "run-a")
    s = rt.session("run-b", provider="openai_chat", principal=CLERK)
    s.user("read it")
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "read_artifact", "arguments": json.dumps({"ref": ref})},
    }
    out = s.handle({"role": "assistant", "content": None, "tool_calls": [call]}).observations[0]
    assert out.error is not None and out.error.category == "invalid_arguments"
    assert "salary" not in json.dumps(out.to_dict())
