"""read_artifact keeps refusing a principal once the tool that produced the artifact is dropped."""

from __future__ import annotations

import json
from typing import Any

from actionspace import Principal, Runtime

BIG = "\n".join(f"salary row {i}: " + "9" * 60 for i in range(2000))


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def _payroll(month: str) -> str:
    """Read the payroll export."""
    return BIG


def _shown_payroll(rt: Runtime, run_id: str) -> str:
    """The artifact ref of a payroll read shown in ``run_id`` to a principal allowed to read payroll."""
    hr = Principal(id="hr", scopes=("read:payroll", "read:read_artifact"))
    s = rt.session(run_id, provider="openai_chat", principal=hr)
    s.user("summarise the payroll")
    obs = s.handle(_call("c1", "payroll", {"month": "2026-11"})).observations[0]
    assert obs.ok and obs.artifact_ref is not None
    s.tools()  # read_artifact is offered now, with its gate
    return obs.artifact_ref


def _drop_version_one(rt: Runtime) -> None:
    rt.tool(name="payroll", version="2", effect="read", scopes=["read:payroll"])(_payroll)
    rt.catalog.retire("payroll@1")
    rt.catalog.drop("payroll@1")
    assert rt.catalog.find("payroll@1") is None


def test_a_principal_without_the_producers_scope_is_refused_after_the_producer_was_dropped() -> None:
    rt = Runtime("memory://")
    rt.tool(name="payroll", version="1", effect="read", scopes=["read:payroll"])(_payroll)
    ref = _shown_payroll(rt, "conv-payroll")
    clerk = Principal(id="clerk", scopes=("read:read_artifact",))
    s = rt.session("conv-payroll", provider="openai_chat", principal=clerk)
    s.user("read it")
    before = s.handle(_call("c2", "read_artifact", {"ref": ref})).observations[0]
    assert before.error is not None and before.error.category == "permission_denied"
    _drop_version_one(rt)
    after = s.handle(_call("c3", "read_artifact", {"ref": ref, "length": 50})).observations[0]
    assert after.error is not None and after.error.category == "permission_denied"
    assert after.data is None and "salary" not in json.dumps(after.to_dict())
    assert "payroll@1" in after.error.message


def test_a_principal_allowed_every_scope_still_reads_an_artifact_of_a_dropped_producer() -> None:
    rt = Runtime("memory://")
    rt.tool(name="payroll", version="1", effect="read", scopes=["read:payroll"])(_payroll)
    ref = _shown_payroll(rt, "conv-admin")
    _drop_version_one(rt)
    admin = Principal(id="admin", scopes=("*",))
    s = rt.session("conv-admin", provider="openai_chat", principal=admin)
    s.user("read it")
    read = s.handle(_call("c2", "read_artifact", {"ref": ref, "length": 50})).observations[0]
    assert read.ok, read.error
    assert "secret" not in read.provenance.labels and "salary row 0" in json.dumps(read.data)
