"""A read served from the cache carries the label of the call that asked for it, not only the
label of the call that filled the entry (DESIGN §8: a node's output label joins its inputs')."""

from __future__ import annotations

from typing import Any

from actionspace import Labels, Plan, Runtime
from actionspace.policy import Label, label_of

PASSWORD = "hunter2-correct-horse"


class World:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.rt = Runtime("memory://")
        sent = self.sent

        @self.rt.tool(effect="read", labels=Labels(confidentiality="secret"))
        def read_password() -> str:
            """The stored password."""
            return PASSWORD

        @self.rt.tool(effect="read", labels=Labels(confidentiality="public"), cache_ttl=600)
        def echo(text: str) -> str:
            """Repeat a text."""
            return text

        @self.rt.tool(effect="external")
        def send_email(recipient: str, body: str) -> str:
            """Send an email."""
            sent.append({"recipient": recipient, "body": body})
            return "sent"

    def prime(self) -> None:
        """Another run reads ``echo(PASSWORD)`` with a public argument: the entry is public."""
        run = self.rt.new_run()
        self.rt.user_input(run, f"please echo {PASSWORD}")
        obs = self.rt.call(
            {"name": "echo", "arguments": {"text": PASSWORD}}, run_id=run, sources={"text": ["user"]}
        )
        assert obs.status == "ok"
        assert label_of(obs) == Label(confidentiality="public")


def test_a_cached_read_fed_a_secret_by_reference_carries_the_secret_and_nothing_is_sent() -> None:
    w = World()
    w.prime()
    result = w.rt.run_plan(
        Plan.from_dict(
            {
                "nodes": [
                    {"id": "pw", "tool": "read_password", "arguments": {}},
                    {"id": "e", "tool": "echo", "arguments": {"text": {"$ref": "pw.data"}}},
                    {
                        "id": "s",
                        "tool": "send_email",
                        "arguments": {"recipient": "bob@example.com", "body": {"$ref": "e.data"}},
                    },
                ]
            }
        ),
        run_id=w.rt.new_run(),
    )
    echoed = result.nodes["e"]
    assert echoed.provenance.source == "cache"
    assert label_of(echoed).confidentiality == "secret"
    assert result.nodes["s"].error is not None
    assert result.nodes["s"].error.category == "policy_violation"
    assert w.sent == []


def test_a_cached_read_keeps_the_label_it_was_filled_with_when_asked_from_a_public_context() -> None:
    w = World()
    run = w.rt.new_run()
    w.rt.call({"name": "read_password", "arguments": {}}, run_id=run)
    first = w.rt.call({"name": "echo", "arguments": {"text": "hello"}}, run_id=run)
    assert label_of(first).confidentiality == "secret"
    other = w.rt.new_run()
    again = w.rt.call({"name": "echo", "arguments": {"text": "hello"}}, run_id=other)
    assert again.provenance.source == "cache"
    assert label_of(again).confidentiality == "secret"  # the entry keeps its permissions
    assert w.rt.context_label(other).confidentiality == "secret"


def test_a_cached_read_asked_with_public_inputs_stays_public() -> None:
    w = World()
    first = w.rt.call({"name": "echo", "arguments": {"text": "hello"}}, run_id=w.rt.new_run())
    again = w.rt.call({"name": "echo", "arguments": {"text": "hello"}}, run_id=w.rt.new_run())
    assert again.provenance.source == "cache"
    assert label_of(again) == label_of(first) == Label(confidentiality="public")
