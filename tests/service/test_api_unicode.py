"""Text a model may emit that UTF-8 cannot carry (lone surrogates) or stores refuse (U+0000):
a run that proposed it ends, and every read of the API still answers, as UTF-8 JSON."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.service.apptools import bearer, served

AGENT = bearer("agent-token")
ADMIN = bearer("admin-token")
READS = ("/api/runs", "/api/approvals?status=all", "/api/ledger", "/api/metrics", "/api/catalog")

_odd = st.sampled_from(["\ud800", "\udfff", "\x00", "\ufffd", "é"])
_text = st.lists(st.sampled_from(["look", "up", "city", "a"]) | _odd, min_size=1, max_size=4).map("".join)


def _escaped(body: dict[str, Any]) -> bytes:
    """The body as a client writes it: JSON with ``\\uXXXX`` escapes, which may name lone surrogates."""
    return json.dumps(body, ensure_ascii=True).encode()


@settings(max_examples=20, deadline=None)
@example(tool="look\udfffup\x00", key="\ud800", value="x", as_plan=False)
@given(tool=_text | st.just("lookup"), key=_text | st.just("city"), value=_text, as_plan=st.booleans())
def test_a_run_proposing_text_utf8_cannot_carry_ends_and_every_read_still_answers(
    tool: str, key: str, value: str, as_plan: bool
) -> None:
    call = {"name": tool, "arguments": {key: value}}
    plan = {"nodes": [{"id": f"n{value}", "tool": tool, "arguments": {key: value}}]}
    body = {"plan": plan} if as_plan else {"calls": [call]}
    with served() as (_client, _rt, _world, _approvals, app):
        client = TestClient(app, raise_server_exceptions=False)
        started = client.post(
            "/api/runs", content=_escaped(body), headers={**AGENT, "content-type": "application/json"}
        )
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        assert app.state.runner.wait(run_id, timeout=10) in ("ok", "partial", "error")
        for path in (*READS, f"/api/runs/{run_id}", f"/api/runs/{run_id}/events"):
            answer = client.get(path, headers=ADMIN)
            assert answer.status_code == 200, (path, answer.text)
            answer.content.decode("utf-8")  # strict: the whole response is UTF-8
