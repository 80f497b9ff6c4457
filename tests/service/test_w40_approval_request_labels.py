"""An approval request records the label of the call it holds, and the approvals API redacts it by
that label (joined with its run's): a plan node's request fed a secret shows no value to a token
not cleared even while the plan still holds its secret events in memory."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Labels, Plan, Principal, Runtime
from actionspace.approval.requests import ApprovalRequest, ApprovalStore
from actionspace.plan import node as plan_node
from actionspace.policy.redaction import REDACTED
from actionspace.service import create_app
from tests.service.apptools import SignallingApprovals

SECRET = "hunter2-w40-request"
APPROVALS = ("approvals:read", "approvals:decide")
TOKENS = {
    "bob": Principal(id="bob", scopes=APPROVALS),
    "alice": Principal(id="alice", scopes=APPROVALS),
    "ops": Principal(id="ops", scopes=(*APPROVALS, "labels:secret")),
}
SECRET_LABEL = {"confidentiality": "secret", "integrity": "trusted", "readers": None}


class _Watched(SignallingApprovals):
    """An approval store that runs ``on_create`` right after each request is stored."""

    def __init__(self, inner: ApprovalStore, on_create: Callable[[ApprovalRequest], None]) -> None:
        super().__init__(inner)
        self.on_create = on_create

    def create(self, request: ApprovalRequest) -> ApprovalRequest:
        stored = super().create(request)
        self.on_create(stored)
        return stored


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

    @rt.tool(effect="read")
    def clock(zone: str) -> str:
        """The time in a zone."""
        return "noon"

    return rt


@contextmanager
def _served(rt: Runtime) -> Iterator[TestClient]:
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.runner.close()
        rt.close()


def _as(client: TestClient, token: str, method: str, path: str) -> Any:
    answer = client.request(method, path, headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    return answer.json()


def _fed_plan(source: str, sink: str = "store_note") -> Plan:
    """Node ``b`` needs approval (or declassification, for ``send``) and reads ``a``'s output by
    ``$ref``; ``c`` reads nothing secret."""
    fed = {"$ref": "a.data"}
    arguments = {"text": fed} if sink == "store_note" else {"recipient": "x@y.example", "body": fed}
    return Plan.from_dict(
        {
            "nodes": [
                {
                    "id": "a",
                    "tool": source,
                    "arguments": {"name": "db"} if source == "vault" else {"day": "mon"},
                },
                {"id": "c", "tool": "clock", "arguments": {"zone": "utc"}},
                {"id": "b", "tool": sink, "arguments": arguments},
            ]
        }
    )


def _while_buffered(
    monkeypatch: pytest.MonkeyPatch, source: str, sink: str = "store_note"
) -> tuple[str, dict[str, dict[str, Any]]]:
    """Run the plan; right after ``b``'s request is filed (the plan's records still unflushed), read
    the request through the API as every token, and deny it as bob. Returns the run and what each
    token saw (``deny``: bob's answer to the denial)."""
    monkeypatch.setattr(plan_node, "FLUSH_S", 1e9)
    rt = _runtime()
    run = rt.new_run()
    seen: dict[str, dict[str, Any]] = {}
    with _served(rt) as client:

        def look(request: ApprovalRequest) -> None:
            assert [e.kind for e in rt.trace.events(run) if e.call_id == f"{run}:a"] == []  # still buffered
            for token in TOKENS:
                listed = _as(client, token, "GET", "/api/approvals")
                seen[token] = {
                    "listed": next(r for r in listed if r["request_id"] == request.id),
                    "one": _as(client, token, "GET", f"/api/approvals/{request.id}"),
                }
            seen["deny"] = _as(client, "bob", "POST", f"/api/approvals/{request.id}/deny")

        rt.approvals.store = _Watched(rt.approvals.store, look)
        result = rt.run_plan(_fed_plan(source, sink), run_id=run)
    held = result.nodes["b"].error
    assert held is not None and held.category == (
        "needs_approval" if sink == "store_note" else "policy_violation"
    )
    return run, seen


def test_a_plan_nodes_request_fed_a_secret_is_redacted_before_the_plan_flushes_its_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run, seen = _while_buffered(monkeypatch, "vault")
    for token in ("bob", "alice"):
        for shown in seen[token].values():
            assert SECRET not in json.dumps(shown), token
            assert shown["arguments"] == {"text": REDACTED}
            assert shown["preview"]["redacted"] is True
    assert SECRET not in json.dumps(seen["deny"])
    assert seen["deny"]["status"] == "denied"
    for shown in seen["ops"].values():
        assert shown["arguments"] == {"text": SECRET}
        assert "redacted" not in shown["preview"]


def test_a_plan_nodes_request_fed_by_a_reader_restricted_node_shows_values_only_to_its_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run, seen = _while_buffered(monkeypatch, "diary")
    assert SECRET in json.dumps(seen["alice"]["listed"]) and SECRET in json.dumps(seen["alice"]["one"])
    for token in ("bob", "ops"):
        assert SECRET not in json.dumps(seen[token]), token
    assert SECRET not in json.dumps(seen["deny"])


def test_a_declassification_request_of_a_plan_node_fed_a_secret_is_redacted_before_the_flush(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _run, seen = _while_buffered(monkeypatch, "vault", "send")
    for token in ("bob", "alice"):
        for shown in seen[token].values():
            assert SECRET not in json.dumps(shown), token
            assert shown["details"]["label"] == SECRET_LABEL
            assert shown["details"]["approval_rule"] == "declassify"
    assert SECRET not in json.dumps(seen["deny"])
    assert seen["ops"]["one"]["arguments"]["body"] == SECRET


def test_a_request_records_the_label_of_the_call_it_holds() -> None:
    rt = _runtime()
    try:
        run = rt.new_run()
        rt.run_plan(_fed_plan("vault"), run_id=run)
        fed = rt.approvals.list()
        assert [r.details.get("label") for r in fed] == [SECRET_LABEL]
        plain = rt.new_run()
        rt.call({"name": "store_note", "arguments": {"text": "hello"}}, run_id=plain)
        (held,) = [r for r in rt.approvals.list() if r.run_id == plain]
        assert held.details["label"] == {"confidentiality": "public", "integrity": "trusted", "readers": None}
    finally:
        rt.close()


def _stored(rt: Runtime, run: str, label: Any, *, tool: str = "gone@1") -> ApprovalRequest:
    """A pending request filed as another process would (its run's trace holds nothing marked)."""
    details: dict[str, Any] = {"approval_rule": None}
    if label is not None:
        details["label"] = label
    return rt.approvals.store.create(
        ApprovalRequest(
            id=f"apr_w40{abs(hash((run, json.dumps(label, default=repr)))) % 10**9:09d}",
            run_id=run,
            node_id="n1",
            tool=tool,
            args_digest="d" * 64,
            arguments={"text": SECRET},
            provenance={"text": "tool_result:x"},
            effects=(f"note:{SECRET}",),
            reason=f"write {SECRET}",
            details=details,
            created_at=time.time(),
        )
    )


def test_a_request_whose_own_label_is_secret_is_redacted_in_a_run_that_never_was() -> None:
    rt = _runtime()
    run = rt.new_run()
    request = _stored(rt, run, SECRET_LABEL)
    with _served(rt) as client:
        for token in ("bob", "alice", "ops"):
            listed = _as(client, token, "GET", "/api/approvals")
            one = _as(client, token, "GET", f"/api/approvals/{request.id}")
            for shown in (*listed, one):
                assert (SECRET in json.dumps(shown)) is (token == "ops"), token
                assert shown["details"]["label"] == SECRET_LABEL
        refused = client.post(f"/api/approvals/{request.id}/approve", headers={"Authorization": "Bearer bob"})
        assert refused.status_code == 403 and SECRET not in refused.text  # bob was never shown the call
        denied = _as(client, "bob", "POST", f"/api/approvals/{request.id}/deny")
        assert denied["status"] == "denied"
        assert SECRET not in json.dumps(denied)
        assert denied["arguments"] == {"text": REDACTED}


def test_a_request_stored_without_a_label_is_judged_by_its_run_as_before() -> None:
    rt = _runtime()
    run = rt.new_run()
    request = _stored(rt, run, None)
    with _served(rt) as client:
        for token in TOKENS:
            one = _as(client, token, "GET", f"/api/approvals/{request.id}")
            assert one["arguments"] == {"text": SECRET}
            assert "redacted" not in one["preview"]


_marks = st.one_of(
    st.none(),
    st.text(max_size=8),
    st.integers(),
    st.lists(st.text(max_size=4), max_size=3),
    st.fixed_dictionaries(
        {},
        optional={
            "confidentiality": st.one_of(
                st.sampled_from(["public", "internal", "secret", "x"]), st.integers()
            ),
            "integrity": st.one_of(st.sampled_from(["trusted", "untrusted", "?"]), st.none()),
            "readers": st.one_of(
                st.none(), st.lists(st.sampled_from(["alice", "bob", 3]), max_size=3), st.text(max_size=5)
            ),
        },
    ),
)


def _readable_by(mark: Any, token: str) -> bool:
    """Whether ``token`` may read ``mark``: ops holds ``labels:secret`` (no other ``labels:``
    scope), alice and bob only their ids; a malformed mark reads as secret with no readers."""
    cleared = token == "ops"
    if not isinstance(mark, dict):
        return cleared
    conf, integrity = mark.get("confidentiality", "public"), mark.get("integrity", "trusted")
    readers = mark.get("readers")
    if conf not in ("public", "internal", "secret") or integrity not in ("trusted", "untrusted"):
        return cleared
    if readers is not None and not (isinstance(readers, list) and all(isinstance(r, str) for r in readers)):
        return cleared
    if readers is not None and token in readers:
        return True
    return (readers is None and conf != "secret") or (cleared and conf == "secret")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mark=_marks)
def test_any_recorded_label_either_shows_a_request_or_redacts_it_and_never_fails(mark: Any) -> None:
    rt = _runtime()
    run = rt.new_run()
    request = _stored(rt, run, {"__none__": True} if mark is None else mark)
    label = request.details["label"]
    with _served(rt) as client:
        for token in TOKENS:
            one = _as(client, token, "GET", f"/api/approvals/{request.id}")
            assert (SECRET in json.dumps(one)) is _readable_by(label, token), (token, label)
