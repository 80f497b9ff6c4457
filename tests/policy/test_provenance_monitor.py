"""The monitor counts a result as used when a later call's value was found in it."""

from __future__ import annotations

from actionspace import Runtime
from actionspace.evaluation.monitor import monitor
from actionspace.policy.provenance_stage import ProvenanceStage


def test_result_utilization_counts_a_single_call_that_used_an_earlier_result() -> None:
    rt = Runtime("memory://", recover_on_start=False, flow_policy=None, stages=[ProvenanceStage()])

    @rt.tool(effect="read")
    def lookup(name: str) -> dict[str, str]:
        return {"email": f"{name}@corp.example"}

    @rt.tool(effect="external")
    def send(to: str, body: str) -> dict[str, bool]:
        return {"ok": True}

    run = rt.new_run("r")
    rt.user_input(run, "mail bob and carol: lunch?")
    rt.call({"name": "lookup", "arguments": {"name": "bob"}}, run_id=run)
    rt.call({"name": "lookup", "arguments": {"name": "carol"}}, run_id=run)
    assert rt.call({"name": "send", "arguments": {"to": "bob@corp.example", "body": "lunch?"}}, run_id=run).ok
    health = monitor(rt.trace).tool("lookup")
    assert (health.ok_results, health.used_results, health.utilization) == (2, 1, 0.5)
    assert (health.consumers, health.downstream_success) == (1, 1.0)
