"""A stdio server that answers calls with broken JSON-RPC (``test_w16_hostile_ids_program.py``): an
answer twice, without an id or with a null one, a notification or a request where the answer should
be, a result that is not an object. Each call ends typed and on time (a write that got no usable
answer ``unknown_commit``, sent once), and the session serves the next call."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import StdioServer
from actionspace.catalog.spec import NO_RETRY

PROGRAM = str(Path(__file__).resolve().parent / "test_w16_hostile_ids_program.py")
UNANSWERED = ("no_id", "null_id", "notice", "request_same_id", "bare_result", "trickle")
"""Calls that never get an answer this client can take: they end at their timeout."""
TIMEOUT_S = 1.0
LATEST_S = 30.0
"""Far beyond the timeout on any machine: a call that takes longer hangs."""


@pytest.fixture(scope="module")
def rt() -> Iterator[Runtime]:
    # a read retried on its timeout: the one answer a cut-off line garbles is asked again (see trickle)
    options: dict[str, dict[str, Any]] = {"ok": {"timeout_s": 10.0}}
    for kind in UNANSWERED:
        options[kind] = {"timeout_s": TIMEOUT_S, "retry": NO_RETRY}
        options[f"{kind}_write"] = {"timeout_s": TIMEOUT_S}
    runtime = Runtime("memory://", recover_on_start=False)
    server = StdioServer(
        sys.executable,
        args=(PROGRAM,),
        name="ids",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=120.0,
    )
    try:
        runtime.add_mcp_server(server)
        yield runtime
    finally:
        runtime.close()


def _call(rt: Runtime, name: str) -> Any:
    started = time.monotonic()
    obs = rt.call({"name": name, "arguments": {}}, run_id=rt.new_run())
    assert time.monotonic() - started < LATEST_S, f"{name} held the caller"
    after = rt.call({"name": "ok", "arguments": {}})
    assert after.status == "ok" and after.data == "fine", after.error  # the session goes on
    return obs


@pytest.mark.parametrize("kind", UNANSWERED)
def test_a_call_without_a_usable_answer_ends_at_its_timeout_typed(rt: Runtime, kind: str) -> None:
    read = _call(rt, kind)
    assert read.error is not None and read.error.category == "transient", read.error
    assert read.error.recovery
    if kind == "trickle":
        # a read only. The cancelled call leaves its line unended: the server's next answer, written
        # after it, is one junk line and lost; the "ok" above was asked again and answered.
        return
    write = _call(rt, f"{kind}_write")
    assert write.error is not None and write.error.category == "unknown_commit", write.error
    (entry,) = [e for e in rt.ledger.list() if e.tool.startswith(f"{kind}_write@")]
    assert entry.attempts == 1 and entry.state == "unknown_commit"  # never sent twice


@pytest.mark.parametrize("name", ["twice", "twice_write", "string_id", "string_id_write"])
def test_an_answer_sent_twice_or_under_its_id_as_a_string_is_taken_once(rt: Runtime, name: str) -> None:
    obs = _call(rt, name)
    assert obs.status == "ok" and obs.data == "forged", obs.error
    obs = _call(rt, "ok")  # the second copy never passes for a later call's answer
    assert obs.data == "fine"


@pytest.mark.parametrize("name", ["result_and_error", "result_and_error_write"])
def test_an_answer_holding_a_result_and_an_error_is_an_error_never_retried(rt: Runtime, name: str) -> None:
    obs = _call(rt, name)
    assert obs.error is not None and obs.error.category == "unclassified", obs.error
    assert not obs.error.retryable
