"""A server's notifications (log messages, progress, list changes, methods no one knows) that are
nested deep, huge, many, malformed or endless never crash a call nor hold it past its timeout:
the call gets its answer (or, when none comes, ends on time as a typed error), and the server's
other tools keep answering."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from actionspace import Runtime
from actionspace.adapters.mcp_client import StdioServer
from actionspace.catalog.spec import RetryPolicy

PROGRAM = str(Path(__file__).with_name("test_w13_notice_program.py"))


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def noisy(rt: Runtime, kind: str, **options: object) -> None:
    server = StdioServer(
        sys.executable,
        args=(PROGRAM, kind),
        name=f"w13-{kind}",
        allowlisted=True,
        mode="legacy",
        connect_timeout_s=120.0,
        **options,  # type: ignore[arg-type]
    )
    rt.add_mcp_server(server)


@pytest.mark.parametrize("kind", ["deep", "huge", "many", "odd"])
def test_hostile_notifications_before_an_answer_leave_the_call_its_answer(rt: Runtime, kind: str) -> None:
    noisy(rt, kind, timeout_s=120.0)
    obs = rt.call({"name": "noisy", "arguments": {}})
    assert obs.status == "ok", obs.error
    assert obs.data == "done noisy"
    echo = rt.call({"name": "echo", "arguments": {}})
    assert echo.status == "ok" and echo.data == "done echo"


def test_endless_notifications_without_an_answer_end_the_call_at_its_timeout(rt: Runtime) -> None:
    """A write that never answers, only notes, ends as ``unknown_commit`` within its timeout (plus
    the grace a closing request takes), sent once; progress never stretches the deadline."""
    noisy(rt, "endless", timeout_s=2.0, tool_options={"noisy": {"retry": RetryPolicy(max_attempts=1)}})
    started = time.monotonic()
    obs = rt.call({"name": "noisy", "arguments": {}})
    elapsed = time.monotonic() - started
    assert obs.error is not None and obs.error.category == "unknown_commit"
    assert elapsed < 30.0  # the timeout is 2 s; 30 s leaves room for a loaded machine
    [entry] = rt.ledger.list()
    assert entry.state == "unknown_commit"
