"""Approval requests of a run that held secret (or reader-restricted) data show their arguments,
effects and reasons only to a token cleared for that label: listing, one request, a decision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi.testclient import TestClient

from actionspace import Labels, Principal, Runtime
from actionspace.policy.redaction import REDACTED
from actionspace.service import create_app

SECRET = "hunter2-w36-approval"
APPROVALS = ("approvals:read", "approvals:decide")
TOKENS = {
    "bob": Principal(id="bob", scopes=APPROVALS),
    "alice": Principal(id="alice", scopes=APPROVALS),
    "ops": Principal(id="ops", scopes=(*APPROVALS, "labels:secret")),
}


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def vault(name: str) -> str:
        """Read a stored secret."""
        return SECRET

    @rt.tool(effect="read", labels=Labels(readers=frozenset({"alice"})))
    def diary(day: str) -> str:
        """Alice's diary."""
        return f"{SECRET} on {day}"

    @rt.tool(effect="write", requires_approval=True, writes=("note:{text}",))
    def store_note(text: str) -> str:
        """Write a note a person approves first."""
        return "stored"

    @rt.tool(effect="external")
    def send(recipient: str, body: str) -> str:
        """Send a message."""
        return "sent"

    return rt


@contextmanager
def _served() -> Iterator[tuple[TestClient, Runtime, dict[str, str]]]:
    """A secret run holding two requests (an approval and a declassification), a run only alice
    may read holding one; run id → its kind."""
    rt = _runtime()
    secret, private = rt.new_run(), rt.new_run()
    assert rt.call({"name": "vault", "arguments": {"name": "db"}}, run_id=secret).error is None
    note = rt.call({"name": "store_note", "arguments": {"text": SECRET}}, run_id=secret)
    assert note.error is not None and note.error.category == "needs_approval"
    sent = rt.call({"name": "send", "arguments": {"recipient": "a@x.example", "body": SECRET}}, run_id=secret)
    assert sent.error is not None and sent.error.details.get("declassify_request")
    assert rt.call({"name": "diary", "arguments": {"day": "mon"}}, run_id=private).error is None
    mine = rt.call({"name": "store_note", "arguments": {"text": f"{SECRET} on mon"}}, run_id=private)
    assert mine.error is not None and mine.error.category == "needs_approval"
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            yield client, rt, {secret: "secret", private: "alice"}
    finally:
        app.state.runner.close()
        rt.close()


def _get(client: TestClient, token: str, path: str) -> Any:
    answer = client.get(path, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _may_see(token: str, kind: str) -> bool:
    """ops holds labels:secret (not labels:internal); alice is the one reader of her run."""
    return (token, kind) in {("ops", "secret"), ("alice", "alice")}


def test_listed_requests_show_values_only_to_tokens_cleared_for_their_run() -> None:
    with _served() as (client, _rt, runs):
        for token in TOKENS:
            listed = _get(client, token, "/api/approvals?status=all")
            assert sorted(runs[r["run_id"]] for r in listed) == ["alice", "secret", "secret"]
            for request in listed:
                shown = json.dumps(request)
                assert (SECRET in shown) is _may_see(token, runs[request["run_id"]]), (token, request)
                one = _get(client, token, f"/api/approvals/{request['request_id']}")
                assert (SECRET in json.dumps(one)) is _may_see(token, runs[request["run_id"]])


def test_a_redacted_request_still_names_its_tool_run_and_arguments() -> None:
    with _served() as (client, _rt, runs):
        for request in _get(client, "bob", "/api/approvals"):
            assert request["tool"] in ("store_note@1", "send@1")
            assert request["run_id"] in runs and request["status"] == "pending"
            names = sorted(request["arguments"])
            assert names in (["text"], ["body", "recipient"])
            assert request["preview"]["arguments"] == dict.fromkeys(names, REDACTED)
            assert request["preview"]["redacted"] is True
        held = _get(client, "ops", "/api/approvals")
        assert all(r["preview"]["arguments"] == r["arguments"] for r in held)
        assert any(SECRET in str(r["preview"]["arguments"].values()) for r in held)


def test_a_decision_answered_to_a_token_not_cleared_carries_no_value() -> None:
    with _served() as (client, _rt, runs):
        secret_run = next(run for run, kind in runs.items() if kind == "secret")
        pending = [r for r in _get(client, "ops", "/api/approvals") if r["run_id"] == secret_run]
        answer = client.post(
            f"/api/approvals/{pending[0]['request_id']}/deny", headers={"Authorization": "Bearer bob"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "denied"
        assert SECRET not in answer.text
