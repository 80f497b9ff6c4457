"""A stdio server whose process died: what was in flight is reported as lost, what comes after
is never sent and says so (``transient``, nothing to reconcile), never ``unknown_commit``."""

from __future__ import annotations

from actionspace import Runtime
from tests.adapters.mcp_fixtures import rt, sdk_server_stdio

__all__ = ["rt"]


def test_after_the_server_process_died_a_write_is_not_sent_and_needs_no_reconciling(rt: Runtime) -> None:
    toolset = rt.add_mcp_server(sdk_server_stdio(allowlisted=True, reconnect=None))  # no new session
    assert toolset.connection.connected
    crashed = rt.call({"name": "crash", "arguments": {}}, run_id=rt.new_run())
    assert crashed.error is not None and crashed.error.category == "transient"  # a read's lost answer
    run = rt.new_run()
    note = rt.call({"name": "slow_note", "arguments": {"text": "after", "seconds": 0}}, run_id=run)
    assert note.error is not None
    assert note.error.category == "transient", note.error
    assert note.error.vendor_code == "server_unavailable"
    assert not toolset.connection.connected
    assert [e for e in rt.ledger.list() if e.run_id == run and e.state == "unknown_commit"] == []
    echo = rt.call({"name": "echo", "arguments": {"text": "hi"}}, run_id=run)
    assert echo.error is not None and echo.error.vendor_code == "server_unavailable"
