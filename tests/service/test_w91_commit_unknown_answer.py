"""A store write whose end could not be learnt is answered ``unknown_commit``, not ``internal``.

PostgreSQL's ``CommitUnknown`` (a ``COMMIT`` whose answer was lost and whose end the store could not
learn within its bound) reached the service's last handler as any crash: 500 ``internal``, "the
service failed". The client must instead learn that what it asked for may or may not be recorded,
and read it back before asking again: no ``Retry-After`` invites a blind resend.
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from actionspace.ledger._postgres_lost import CommitUnknown
from tests.service.apptools import bearer, served

APPROVER = bearer("approver-token")


def test_a_decision_whose_commit_is_unknown_is_answered_unknown_commit_not_retry() -> None:
    with served() as (_, rt, world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)  # answered as a server answers it
        held = rt.call(
            {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}, run_id="r1", node_id="n1"
        )
        assert held.error is not None
        request_id = held.error.details["request_id"]
        real = rt.approvals.store.update

        def lost(*args: Any, **kwargs: Any) -> Any:
            raise CommitUnknown(4711, "the COMMIT's answer was lost and its end could not be learnt")

        rt.approvals.store.update = lost  # type: ignore[method-assign]
        answer = client.post(f"/api/approvals/{request_id}/approve", headers=APPROVER)
        rt.approvals.store.update = real  # type: ignore[method-assign]
        assert answer.status_code == 500, answer.text
        assert "Retry-After" not in answer.headers
        error = answer.json()["error"]
        assert error["category"] == "unknown_commit"
        assert "read" in error["message"] and "4711" not in error["message"]  # the xid stays in the log
        assert world.payments == []
