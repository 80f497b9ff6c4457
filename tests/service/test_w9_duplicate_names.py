"""A JSON body naming one member twice: which value counts depends on who reads it, so none does.

Python's parser keeps the last value, many others (and the filters a reverse proxy applies) the
first: ``{"to": "acct-ok", "to": "acct-evil"}`` reads as one payment to a proxy's check and as
another to the run. RFC 8259 leaves such a body's meaning open; I-JSON (RFC 7493) forbids it.
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.service.limits import json_problem
from tests.service.apptools import bearer, served

_JSON = {**bearer("admin-token"), "content-type": "application/json"}


def test_a_run_naming_a_member_twice_is_refused_at_the_edge_and_nothing_is_paid() -> None:
    with served() as (_client, rt, world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        body = (
            '{"run_id": "r-dup", "calls": [{"name": "send_payment",'
            ' "arguments": {"to": "acct-ok", "amount": 5, "to": "acct-evil"}}]}'
        )
        answer = client.post("/api/runs", content=body, headers=_JSON)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["category"] == "invalid_arguments" and "'to'" in error["message"]
        assert rt.trace.events("r-dup") == [] and world.payments == []
        twice = client.post(
            "/api/runs", content='{"run_id": "r-1", "calls": [], "run_id": "r-2"}', headers=_JSON
        )
        assert twice.status_code == 400 and "'run_id'" in twice.json()["error"]["message"], twice.text
        assert rt.trace.events("r-1") == [] and rt.trace.events("r-2") == []


def test_a_decision_naming_its_reason_twice_is_refused_and_the_request_stays_pending() -> None:
    with served() as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        held = rt.call(
            {"name": "send_payment", "arguments": {"to": "a", "amount": 5}}, run_id="r", node_id="n"
        )
        assert held.error is not None
        request_id = held.error.details["request_id"]
        body = '{"reason": "checked with the customer", "reason": "no"}'
        answer = client.post(f"/api/approvals/{request_id}/approve", content=body, headers=_JSON)
        assert answer.status_code == 400 and answer.json()["error"]["category"] == "invalid_arguments"
        assert rt.approvals.get(request_id).status == "pending"  # type: ignore[union-attr]


_names = st.text(alphabet="ab\u00e9\U0001f600", min_size=1, max_size=3)
_leaves = st.one_of(st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.text(max_size=4))
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_names, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(value=_values, name=_names, first=_leaves, second=_leaves, escaped=st.booleans())
def test_a_member_named_twice_anywhere_is_refused_and_a_body_without_one_is_not(
    value: object, name: str, first: object, second: object, escaped: bool
) -> None:
    clean = json.dumps(value)
    assert json_problem(clean.encode()) is None
    # the same name spelled once plainly and once with escapes is still the same name
    spelled = json.dumps(name, ensure_ascii=escaped)
    pair = f"{{{json.dumps(name)}: {json.dumps(first)}, {spelled}: {json.dumps(second)}}}"
    body = json.dumps({"outer": [value, "<>"]}).replace('"<>"', pair)
    problem = json_problem(body.encode())
    assert problem is not None and repr(name) in problem
