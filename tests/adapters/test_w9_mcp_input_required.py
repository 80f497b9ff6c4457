"""A 2026-era MCP server that answers a call with ``input_required``: asking for input this client
never offered (sampling, elicitation, roots), or handing back a request state round after round. The
call ends as a typed error naming what happened, never as the runtime's own ``internal`` failure nor
as a write known not to have committed: the server had the request and may have acted on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST

from actionspace import Runtime
from actionspace.adapters._mcp_connection import _refused_here
from actionspace.adapters.mcp_client import HttpServer
from tests.adapters.test_w9_mcp_notice_stream import _serve


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.touch()
    return path


@pytest.fixture
def session(notes: Path, request: pytest.FixtureRequest) -> Iterator[Runtime]:
    proc, url = _serve(notes, request.param, version="2026-07-28")
    try:
        rt = Runtime("memory://", recover_on_start=False)
        rt.add_mcp_server(HttpServer(url, name="w9", allowlisted=True, timeout_s=30.0, mode="auto"))
        try:
            yield rt
        finally:
            rt.close()
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("session", ["input_asked"], indirect=True)
@pytest.mark.parametrize(("tool", "category"), [("ok", "permanent"), ("ok_write", "unknown_commit")])
def test_a_call_answered_with_a_request_for_input_never_offered_ends_as_a_typed_error(
    session: Runtime, notes: Path, tool: str, category: str
) -> None:
    obs = session.call({"name": tool, "arguments": {}}, run_id=session.new_run())
    assert obs.status == "error" and obs.error is not None
    assert obs.error.category == category, obs.error
    if category != "unknown_commit":  # the runtime words its own unknown_commit
        assert obs.error.details.get("error") == "input_refused", obs.error
    assert notes.read_text().splitlines().count(f"asked {tool}") == 1  # sent once, never again


@pytest.mark.parametrize("session", ["input_state"], indirect=True)
@pytest.mark.parametrize(("tool", "category"), [("ok", "transient"), ("ok_write", "unknown_commit")])
def test_a_call_the_server_keeps_answering_with_a_request_state_ends_as_a_typed_error(
    session: Runtime, notes: Path, tool: str, category: str
) -> None:
    obs = session.call({"name": tool, "arguments": {}}, run_id=session.new_run())
    assert obs.status == "error" and obs.error is not None
    assert obs.error.category == category, obs.error
    if category != "unknown_commit":  # the runtime words its own unknown_commit
        assert obs.error.details.get("error") == "input_rounds_exceeded", obs.error
    assert notes.read_text().splitlines().count(f"asked {tool}") >= 2  # the protocol's own rounds


def test_the_same_error_code_sent_by_the_server_is_not_taken_for_a_refused_input_request() -> None:
    def sent() -> None:
        raise MCPError(INVALID_REQUEST, "Elicitation not supported")

    with pytest.raises(MCPError) as caught:
        sent()
    assert not _refused_here(caught.value)
    assert not _refused_here(MCPError(INVALID_REQUEST, "never raised"))
