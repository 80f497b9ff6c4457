"""The error texts left outside the executor are redacted too: an MCP server's errors, a status
query that raises, a failure of a validator (``internal``). None of them shows a credential.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from actionspace import Runtime, ToolCall
from actionspace.adapters._mcp_errors import map_call_error, map_tool_error_result
from actionspace.catalog.spec import ToolSpec
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.status import query_status

PASSWORD = "hunter2-Zq9"
LEAK = f"connect to postgresql://admin:{PASSWORD}@db.internal/x failed"


def _shown(value: Any) -> str:
    return repr(value)


@pytest.mark.parametrize(
    "error",
    [
        map_call_error(RuntimeError(LEAK), side_effects=True),
        map_call_error(ConnectionError(LEAK), side_effects=False),
        map_call_error(MCPError(-32603, LEAK, {"dsn": LEAK}), side_effects=True),
        map_tool_error_result(LEAK, None, trusted=False),
    ],
    ids=["unclassified", "local-failure", "jsonrpc", "tool-error-result"],
)
def test_an_mcp_servers_error_shows_no_password(error: Any) -> None:
    assert PASSWORD not in _shown(error.message) + _shown(error.details)
    assert "db.internal" in error.message  # the rest of the message stays useful


def test_a_status_query_that_raises_shows_no_password() -> None:
    def status(**_: Any) -> Any:
        raise RuntimeError(LEAK)

    spec = ToolSpec(
        name="pay",
        input_schema={"type": "object", "properties": {}},
        fn=lambda: None,
        effect="write",
        idempotency="query",
        status_query=status,
    )
    entry = LedgerEntry(key="as1_k", run_id="r", node_id="n", tool="pay@1", args_digest="d", arguments={})
    answer = query_status(spec, entry)
    assert PASSWORD not in _shown(answer)


def test_a_validator_failure_shows_no_password() -> None:
    rt = Runtime("memory://")

    def check(arguments: dict[str, Any]) -> None:
        raise RuntimeError(LEAK)

    @rt.tool(effect="read", validators=[check])
    def lookup(q: str) -> str:
        """Look something up."""
        return q

    obs = rt.call(ToolCall(name="lookup", arguments={"q": "x"}))
    assert obs.status == "error"
    assert PASSWORD not in _shown(obs.error)
    events = [dict(e.data) for run in rt.trace.runs(limit=10) for e in rt.trace.events(run.run_id)]
    assert PASSWORD not in _shown(events)
