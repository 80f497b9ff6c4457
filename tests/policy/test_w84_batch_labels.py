"""A batch call whose items carry mixed labels: the batch's result, and each item's observation,
carry the call's output label (the join of every item's), so no item's secret reaches a sink
through the batch's shared result, whichever way the batch is split."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Labels, Plan, Runtime
from actionspace.policy import label_of

PASSWORD = "hunter2-correct-horse"
MODES = ["per_item", "chunked", "all_or_nothing"]


class World:
    def __init__(self, batch: str) -> None:
        self.sent: list[Any] = []
        self.rt = Runtime("memory://")
        sent = self.sent

        @self.rt.tool(effect="read", labels=Labels(confidentiality="secret"))
        def read_password() -> str:
            """The stored password."""
            return PASSWORD

        @self.rt.tool(
            effect="read",
            labels=Labels(confidentiality="public"),
            batch=batch,
            max_items=10,
            **({"chunk_size": 1} if batch == "chunked" else {}),
        )
        def shout(items: list[dict[str, Any]]) -> list[str]:
            """Upper-case each item's text."""
            return [str(item["text"]).upper() for item in items]

        @self.rt.tool(effect="external")
        def send_email(recipient: str, body: Any) -> str:
            """Send an email."""
            sent.append(body)
            return "sent"

    def run(self, items: list[dict[str, Any]], ref: str) -> dict[str, Any]:
        nodes = [
            {"id": "pw", "tool": "read_password", "arguments": {}},
            {"id": "b", "tool": "shout", "arguments": {"items": items}},
            {
                "id": "s",
                "tool": "send_email",
                "arguments": {"recipient": "bob@example.com", "body": {"$ref": ref}},
                "depends_on": ["b"],
            },
        ]
        return dict(self.rt.run_plan(Plan.from_dict({"nodes": nodes}), run_id=self.rt.new_run()).nodes)


MIXED: list[dict[str, Any]] = [{"id": "s", "text": {"$ref": "pw.data"}}, {"id": "p", "text": "hello"}]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ref", ["b.items", "b.data"])
def test_a_batch_with_one_secret_item_sends_nothing_through_its_shared_result(mode: str, ref: str) -> None:
    w = World(mode)
    nodes = w.run(MIXED, ref)
    batch = nodes["b"]
    assert batch.status == "ok", batch
    assert label_of(batch).confidentiality == "secret"
    assert all(label_of(item).confidentiality == "secret" for item in batch.items)
    sink = nodes["s"]
    assert sink.error is not None and sink.error.category == "policy_violation", sink
    assert w.sent == []


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_of_public_items_still_reaches_the_sink(mode: str) -> None:
    w = World(mode)
    nodes = w.run([{"id": "p", "text": "hello"}, {"id": "q", "text": "world"}], "b.items")
    assert label_of(nodes["b"]).confidentiality == "public"
    assert nodes["s"].status == "ok", nodes["s"]
    assert len(w.sent) == 1 and PASSWORD.upper() not in str(w.sent)


def test_a_failed_item_of_a_mixed_batch_is_as_secret_as_the_batch() -> None:
    rt = Runtime("memory://")

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """The stored password."""
        return PASSWORD

    @rt.tool(effect="read", labels=Labels(confidentiality="public"), batch="per_item", max_items=10)
    def check(items: list[dict[str, Any]]) -> str:
        """Check each item's text."""
        (item,) = items
        raise ValueError(f"bad text {item['text']}")

    nodes = rt.run_plan(
        Plan.from_dict(
            {
                "nodes": [
                    {"id": "pw", "tool": "read_password", "arguments": {}},
                    {"id": "b", "tool": "check", "arguments": {"items": MIXED}},
                ]
            }
        ),
        run_id=rt.new_run(),
    ).nodes
    batch = nodes["b"]
    assert batch.status == "error"
    assert batch.error is not None and PASSWORD in batch.error.message
    assert label_of(batch).confidentiality == "secret"
    assert all(label_of(item).confidentiality == "secret" for item in batch.items)
