"""Fault injection: the gateway process dies while a write is in flight.

The tool commits to its own database and then the gateway is killed before it can answer, so the
client never learns the outcome. The client reconnects to a new gateway process and retries the
same logical action (same run and node named in ``_meta``): the write must not be sent again, and
the answer must say honestly that the outcome is unknown.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import cast

import anyio
import mcp_types as types
import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_gateway import NODE_META, RUN_META
from tests.adapters.gateway_sample_tools import FIFO_ENV, count
from tests.adapters.gateway_support import (
    ALICE_TOKEN,
    error_of,
    http_session,
    spawn_http_gateway,
    stop,
    store_url,
    write_config,
)

META = cast(types.RequestParamsMeta, {RUN_META: "nightly-job", NODE_META: "open-ticket"})
ARGS = {"customer_id": "c77", "title": "gateway died here"}


def _release(fifo: Path) -> None:
    with contextlib.suppress(OSError):  # nobody is reading: nothing to release
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


@pytest.mark.slow  # two gateway processes and a kill
def test_a_write_lost_with_a_killed_gateway_is_never_resent_and_reported_as_unknown_commit(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path, tools="CRASHY")
    fifo = tmp_path / "committed.fifo"
    os.mkfifo(fifo)
    desk = str(tmp_path / "desk.db")
    url, first = spawn_http_gateway(config, **{FIFO_ENV: str(fifo)})
    outcome: list[str] = []

    async def doomed_call() -> None:
        try:
            async with http_session(url, ALICE_TOKEN) as session:
                await session.call_tool("open_ticket_then_hang", ARGS, meta=META)
            outcome.append("answered")
            _release(fifo)  # the tool never got to signal: let the waiting reader fail, not hang
        except Exception:
            outcome.append("lost")

    def kill_once_committed() -> None:
        with open(fifo) as signal:  # returns when the tool has committed and said so
            said = signal.readline()
        if said != "committed\n":
            return
        first.kill()
        first.wait()

    async def crash_phase() -> None:
        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                tg.start_soon(doomed_call)
                await anyio.to_thread.run_sync(kill_once_committed, abandon_on_cancel=True)

    try:
        anyio.run(crash_phase)
    finally:
        stop(first)
    assert outcome == ["lost"]
    assert count("tickets", desk) == 1

    # What an operator does after a crash: settle in-flight entries (this tool has no status query).
    with Runtime(store_url(tmp_path), recover_on_start=False) as operator:
        report = operator.recover()
    assert len(report.unknown_commit) == 1

    url, second = spawn_http_gateway(config, **{FIFO_ENV: str(fifo)})

    async def retry() -> types.CallToolResult:
        with anyio.fail_after(120):
            async with http_session(url, ALICE_TOKEN) as session:
                return await session.call_tool("open_ticket_then_hang", ARGS, meta=META)

    try:
        result = anyio.run(retry)
    finally:
        stop(second)
    error = error_of(result)
    assert error["category"] == "unknown_commit"
    assert "query_status" in error["recovery"] or "reconcile_by_hand" in error["recovery"]
    assert count("tickets", desk) == 1
