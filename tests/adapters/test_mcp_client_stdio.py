"""The MCP client adapter against real servers from PyPI, over stdio."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_errors import map_call_error
from actionspace.adapters.mcp_client import McpToolset, StdioServer
from actionspace.errors import ConfigurationError
from tests.adapters.mcp_fixtures import CONNECT_TIMEOUT_S, git_repo, rt, sqlite_server_command, time_server

__all__ = ["git_repo", "rt", "sqlite_server_command"]

NOW_IN_PARIS = {"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}


@pytest.fixture(scope="module")
def time_rt() -> Iterator[Runtime]:
    """One runtime with the allowlisted time server, shared by the read-only tests."""
    runtime = Runtime("memory://", recover_on_start=False)
    runtime.add_mcp_server(time_server(allowlisted=True))
    try:
        yield runtime
    finally:
        runtime.close()


def test_an_allowlisted_read_only_tool_runs_at_once_with_its_schema(time_rt: Runtime) -> None:
    rt = time_rt
    spec = rt.catalog.get("get_current_time")
    assert (spec.effect, spec.risk, spec.requires_approval, spec.idempotency) == (
        "read",
        "low",
        False,
        "none",
    )
    assert spec.input_schema["required"] == ["timezone"]
    assert spec.owner == "mcp:time"
    obs = rt.call(NOW_IN_PARIS)
    assert obs.status == "ok", obs.error
    assert obs.data["timezone"] == "Europe/Paris"
    assert obs.tool_version == "1"


def test_a_read_only_tool_of_an_untrusted_server_waits_for_approval(rt: Runtime) -> None:
    toolset = rt.add_mcp_server(time_server())
    assert toolset.claimed["get_current_time"] is not None
    assert toolset.claimed["get_current_time"].read_only_hint is True  # claimed, not believed
    run = rt.new_run()
    held = rt.call(NOW_IN_PARIS, run_id=run)
    assert held.error is not None and held.error.category == "needs_approval"
    rt.approvals.approve(held.error.details["request_id"], by="alice")
    obs = rt.call(NOW_IN_PARIS, run_id=run)
    assert obs.status == "ok", obs.error
    kinds = [e.kind for e in rt.trace.events(run)]
    assert "approval_requested" in kinds and "dispatched" in kinds


def test_arguments_are_validated_before_they_reach_the_server(time_rt: Runtime) -> None:
    rt = time_rt
    run = rt.new_run()
    obs = rt.call({"name": "get_current_time", "arguments": {"tz": "UTC"}}, run_id=run)
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert "dispatched" not in [e.kind for e in rt.trace.events(run)]


def test_a_tool_error_result_reaches_the_model_as_an_error_value(time_rt: Runtime) -> None:
    rt = time_rt
    obs = rt.call({"name": "get_current_time", "arguments": {"timezone": "Nowhere/Land"}})
    assert obs.error is not None
    assert obs.error.category == "unclassified"
    assert obs.error.vendor_code == "isError"
    assert "Nowhere/Land" in obs.error.message


def test_a_json_rpc_error_of_a_real_server_is_mapped_and_async_callers_work(rt: Runtime) -> None:
    async def scenario() -> tuple[BaseException, Observation]:
        toolset = await rt.aadd_mcp_server(time_server(allowlisted=True))
        with pytest.raises(MCPError) as raised:
            await toolset.connection.call_tool("no_such_tool", {})
        return raised.value, await rt.acall(NOW_IN_PARIS)

    raised, obs = asyncio.run(scenario())
    error = map_call_error(raised, side_effects=False)
    assert error.vendor_code is not None and error.vendor_code.startswith("jsonrpc:")
    assert error.category == "invalid_arguments"
    assert obs.status == "ok", obs.error


def test_git_writes_on_a_temp_repository_go_through_the_ledger(rt: Runtime, git_repo: Path) -> None:
    server = StdioServer(
        sys.executable,
        args=("-m", "mcp_server_git", "--repository", str(git_repo)),
        name="git",
        allowlisted=True,
        prefix="git.",
        tool_options={"git_commit": {"writes": ("git:{repo_path}",)}},
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    toolset = rt.add_mcp_server(server)
    specs = toolset.specs()
    assert specs["git.git_status"].effect == "read"
    assert specs["git.git_commit"].effect == "write"
    assert specs["git.git_commit"].idempotency == "none"
    assert specs["git.git_commit"].writes == ("git:{repo_path}",)
    run = rt.new_run()
    repo = str(git_repo)
    added = rt.call(
        {"name": "git.git_add", "arguments": {"repo_path": repo, "files": ["notes.txt"]}}, run_id=run
    )
    assert added.status == "ok", added.error
    done = rt.call(
        {"name": "git.git_commit", "arguments": {"repo_path": repo, "message": "first note"}}, run_id=run
    )
    assert done.status == "ok", done.error
    log = subprocess.run(
        ["git", "-C", repo, "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    assert log.stdout.strip() == "first note"
    committed = {e.tool: e for e in rt.ledger.list(state="committed") if e.run_id == run}
    assert sorted(committed) == ["git.git_add@1", "git.git_commit@1"]
    # The same logical action again is replayed from the ledger, not committed twice.
    again = rt.call(
        {"name": "git.git_commit", "arguments": {"repo_path": repo, "message": "first note"}},
        run_id=run,
        node_id=committed["git.git_commit@1"].node_id,
    )
    assert again.status == "ok"
    assert again.data == done.data
    log = subprocess.run(
        ["git", "-C", repo, "log", "--format=%s"], capture_output=True, text=True, check=True
    )
    assert log.stdout.strip().splitlines() == ["first note"]
    status = rt.call({"name": "git.git_status", "arguments": {"repo_path": repo}}, run_id=run)
    assert "nothing to commit" in str(status.data)


@pytest.mark.slow
def test_sqlite_server_from_pypi_speaks_the_handshake_era_protocol(
    rt: Runtime, tmp_path: Path, sqlite_server_command: str
) -> None:
    server = StdioServer(
        sqlite_server_command,
        args=("--db-path", str(tmp_path / "t.db")),
        allowlisted=True,
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    toolset = rt.add_mcp_server(server)
    assert toolset.connection.protocol_version is not None
    assert not toolset.connection.protocol_version.startswith("2026")
    names = set(toolset.specs())
    assert {"read_query", "write_query", "create_table", "list_tables"} <= names
    assert toolset.specs()["write_query"].effect == "external"  # no annotations: the cautious default
    run = rt.new_run()
    made = rt.call(
        {"name": "create_table", "arguments": {"query": "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"}},
        run_id=run,
    )
    assert made.status == "ok", made.error
    wrote = rt.call(
        {"name": "write_query", "arguments": {"query": "INSERT INTO t (v) VALUES ('a')"}}, run_id=run
    )
    assert wrote.status == "ok", wrote.error
    read = rt.call({"name": "read_query", "arguments": {"query": "SELECT v FROM t"}}, run_id=run)
    assert read.status == "ok", read.error
    assert "'a'" in str(read.data) or '"a"' in str(read.data)
    # This server reports query failures as ordinary text, not as isError: they stay data.
    bad = rt.call({"name": "read_query", "arguments": {"query": "SELECT * FROM missing"}}, run_id=run)
    assert "no such table" in str(bad.data)


def test_a_server_that_cannot_start_is_a_configuration_error(rt: Runtime, tmp_path: Path) -> None:
    toolset = McpToolset(StdioServer(str(tmp_path / "no-such-server"), connect_timeout_s=10))
    with pytest.raises(ConfigurationError, match="cannot connect"):
        toolset.register(rt)
    assert rt.catalog.offerable() == []
    with pytest.raises(ConfigurationError, match="cannot connect"):  # a retry connects afresh
        toolset.register(rt)
