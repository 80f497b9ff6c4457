"""Object keys are data: a secret written as a key is as secret as one written as a value."""

from __future__ import annotations

from tests.policy.test_flow_runtime import PASSWORD, World


def _world() -> tuple[World, list[dict[str, object]]]:
    w = World()
    reports: list[dict[str, object]] = []

    @w.rt.tool(effect="external")
    def send_report(recipient: str, fields: dict[str, str]) -> str:
        """Send a report of named fields."""
        reports.append({"recipient": recipient, "fields": fields})
        return "sent"

    return w, reports


def test_a_secret_key_is_not_laundered_by_a_source_claim_on_its_values() -> None:
    w, reports = _world()
    run = w.rt.new_run()
    w.rt.user_input(run, "send bob the status: ok")
    assert w.call(run, "read_password").ok  # the model has seen the secret
    obs = w.call(
        run,
        "send_report",
        sources={"recipient": ["user"], "fields": ["user"]},
        recipient="bob",
        fields={PASSWORD: "ok"},  # "ok" occurs in the user's words; the key does not
    )
    assert obs.error is not None and obs.error.category == "policy_violation", obs
    assert reports == []
    # the same call with a key the user did write goes out
    fine = w.call(
        run,
        "send_report",
        sources={"recipient": ["user"], "fields": ["user"]},
        recipient="bob",
        fields={"status": "ok"},
    )
    assert fine.ok, fine.error
    assert reports == [{"recipient": "bob", "fields": {"status": "ok"}}]


def test_a_secret_key_beside_a_reference_in_a_plan_carries_the_context_label() -> None:
    w, reports = _world()
    run = w.rt.new_run()
    assert w.call(run, "read_password").ok  # the model writes the plan after seeing the secret
    plan = {
        "nodes": [
            {"id": "contacts", "tool": "list_contacts", "arguments": {}},
            {
                "id": "leak",
                "tool": "send_report",
                "arguments": {
                    "recipient": {"$ref": "contacts.data.bob"},
                    "fields": {PASSWORD: {"$ref": "contacts.data.bob"}},
                },
            },
        ]
    }
    result = w.rt.run_plan(plan, run_id=run)
    leak = result.nodes["leak"]
    assert leak.error is not None and leak.error.category == "policy_violation", leak
    assert reports == []


def test_a_plan_nodes_error_is_stored_under_its_own_label_before_the_plan_ends() -> None:
    from actionspace.policy import Principal, redact_events

    w = World()

    @w.rt.tool(effect="none")
    def check(text: str) -> str:
        """Check a text."""
        raise ValueError(f"rejected input {text}")

    run = w.rt.new_run()
    plan = {
        "nodes": [
            {"id": "secret", "tool": "read_password", "arguments": {}},
            {"id": "boom", "tool": "check", "arguments": {"text": {"$ref": "secret.data"}}},
        ]
    }
    result = w.rt.run_plan(plan, run_id=run)
    boom = result.nodes["boom"]
    assert boom.error is not None and PASSWORD in boom.error.message
    viewer = Principal(id="auditor", scopes=("trace:read",))
    shown = redact_events([e for e in w.rt.trace.events(run) if e.call_id == boom.call_id], viewer)
    assert shown
    assert all(PASSWORD not in repr(e.data) for e in shown)
