"""Only a value the schema's default supplies carries no label: a claim of ``default`` launders nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from tests.policy.test_flow_runtime import PASSWORD, World

SIGNATURE = "-- sent by the assistant"


def _world() -> World:
    w = World()

    def send_note(recipient: str, body: str, footer: str) -> str:
        w.sent.append({"recipient": recipient, "body": body, "footer": footer})
        return "sent"

    w.rt.add_tool(
        name="send_note",
        input_schema={
            "type": "object",
            "properties": {
                "recipient": {"type": "string"},
                "body": {"type": "string"},
                "footer": {"type": "string", "default": SIGNATURE},
            },
            "required": ["recipient", "body"],
        },
        fn=send_note,
        effect="external",
    )
    return w


def _after_the_secret(w: World) -> str:
    run = w.rt.new_run()
    w.rt.user_input(run, "Tell bob@example.com I am late.")
    assert w.call(run, "read_password").ok  # the model has seen the secret
    return run


def _flow_sources(rt: Runtime, run: str) -> dict[str, Any]:
    checked = [e for e in rt.trace.events(run) if e.kind == "flow_checked"][-1]
    return {a: v["sources"] for a, v in checked.data["arguments"].items()}


def test_a_value_claimed_as_a_default_carries_the_context_label_and_nothing_is_sent() -> None:
    w = _world()
    run = _after_the_secret(w)
    leak = w.rt.call(
        {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": PASSWORD}},
        run_id=run,
        sources={"recipient": ["user"]},
        provenance={"body": "default"},  # send_email's body has no default at all
    )
    assert leak.error is not None and leak.error.category == "policy_violation", leak
    assert leak.error.details["arguments"] == {"body": [f"{run}:n1"]}
    assert w.sent == []


def test_a_plan_node_claiming_defaults_cannot_send_a_secret_the_model_has_seen() -> None:
    w = _world()
    run = _after_the_secret(w)
    plan = {
        "nodes": [
            {
                "id": "leak",
                "tool": "send_note",
                "arguments": {"recipient": "bob@example.com", "body": PASSWORD, "footer": PASSWORD},
                "provenance": {"recipient": "default", "body": "default", "footer": "default"},
            }
        ]
    }
    result = w.rt.run_plan(Plan.from_dict(plan), run_id=run)
    leak = result.nodes["leak"]
    assert leak.error is not None and leak.error.category == "policy_violation", leak
    assert sorted(leak.error.details["arguments"]) == ["body", "footer", "recipient"]
    assert w.sent == []


def test_the_schemas_own_default_still_carries_no_label() -> None:
    w = _world()
    run = _after_the_secret(w)
    sent = w.rt.call(
        {"name": "send_note", "arguments": {"recipient": "bob@example.com", "body": "late"}},
        run_id=run,
        sources={"recipient": ["user"], "body": ["user"]},
    )
    assert sent.ok, sent.error
    assert _flow_sources(w.rt, run)["footer"] == ["default"]
    # written out by the model and claimed as the default, it is still the schema's constant
    again = w.rt.call(
        {
            "name": "send_note",
            "arguments": {"recipient": "bob@example.com", "body": "I am late", "footer": SIGNATURE},
        },
        run_id=run,
        sources={"recipient": ["user"], "body": ["user"]},
        provenance={"footer": "default"},
    )
    assert again.ok, again.error
    assert [m["footer"] for m in w.sent] == [SIGNATURE, SIGNATURE]


@settings(max_examples=60, deadline=None)
@given(
    footer=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=40).filter(
        lambda s: s != SIGNATURE
    )
)
def test_any_other_value_claimed_as_the_default_carries_the_context_label(footer: str) -> None:
    w = _world()
    run = _after_the_secret(w)
    obs = w.rt.call(
        {
            "name": "send_note",
            "arguments": {"recipient": "bob@example.com", "body": "late", "footer": footer},
        },
        run_id=run,
        sources={"recipient": ["user"], "body": ["user"]},
        provenance={"footer": "default"},
    )
    assert obs.error is not None and obs.error.category == "policy_violation", obs
    assert list(obs.error.details["arguments"]) == ["footer"]
    assert w.sent == []
