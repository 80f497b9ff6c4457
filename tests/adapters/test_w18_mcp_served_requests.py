"""The bound on a server's requests that wait for the client's answer (``Asked.serve``) counts requests,
not ids: the SDK spawns a task for every request it is handed, even one under the id of another that
still waits, so a stdio server repeating one id must be held to the same bound as one that does not."""

from __future__ import annotations

import json

import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from actionspace.adapters._mcp_inflight import MAX_SERVED, Asked
from actionspace.adapters._mcp_stdio import _Lines


def _request(request_id: int | str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode() + b"\n"


def test_a_server_repeating_one_request_id_is_served_only_up_to_the_bound() -> None:
    lines = _Lines(1 << 20)
    handed = [i for i in lines.feed(_request("same") * (4 * MAX_SERVED)) if isinstance(i, SessionMessage)]
    assert len(handed) == MAX_SERVED


_IDS = st.sampled_from([1, 2, "1", "a"])
_STEPS = st.lists(st.tuples(st.sampled_from(["ask", "answer"]), _IDS), max_size=400)


@given(steps=_STEPS)
def test_requests_handed_on_never_outnumber_the_bound_whatever_their_ids(
    steps: list[tuple[str, int | str]],
) -> None:
    # a model of what waits: per id (exact type), how many requests were handed on and not yet answered
    asked = Asked()
    waiting: dict[tuple[type, int | str], int] = {}
    for step, request_id in steps:
        key = (type(request_id), request_id)
        if step == "ask":
            request = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="ping"))
            handed = isinstance(asked.serve(request), SessionMessage)
            assert handed == (sum(waiting.values()) < MAX_SERVED)
            if handed:
                waiting[key] = waiting.get(key, 0) + 1
        else:
            asked.sent(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result={}))
            if waiting.get(key):
                waiting[key] -= 1
        assert asked.serving == sum(waiting.values()) <= MAX_SERVED
