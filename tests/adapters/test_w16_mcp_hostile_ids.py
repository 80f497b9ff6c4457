"""A stdio server that answers calls with broken JSON-RPC (``test_w16_hostile_ids_program.py``): an
answer twice, a notification or a request where the answer should be, a result that is not an object,
a line left unended. Each call ends typed and on time (a write that got no usable answer
``unknown_commit``, sent once), and the session serves the next call. Answers without an id, with a
null one or under the id as a string are in ``test_w17_mcp_answer_ids.py``."""

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
UNANSWERED = ("notice", "request_same_id", "trickle")
"""Calls that never get an answer this client can take: they end at their timeout."""
MALFORMED = ("bare_result", "result_and_error", "string_id", "no_id")
"""Calls answered against the protocol: a result that is a string; a result and an error together;
the answer under the call's id as a string; a result without an id while the call is the only one in
flight."""
TIMEOUT_S = 1.0
LATEST_S = 30.0
"""Far beyond the timeout on any machine: a call that takes longer hangs."""


@pytest.fixture(scope="module")
def rt() -> Iterator[Runtime]:
    # never retried: an answer glued to the unended line a cancelled call left must be read the first time
    options: dict[str, dict[str, Any]] = {"ok": {"timeout_s": LATEST_S, "retry": NO_RETRY}}
    for kind in UNANSWERED:
        options[kind] = {"timeout_s": TIMEOUT_S, "retry": NO_RETRY}
        options[f"{kind}_write"] = {"timeout_s": TIMEOUT_S}
    for kind in MALFORMED:  # a timeout far past LATEST_S: a call ending at it fails _call's bound
        options[kind] = {"timeout_s": 4 * LATEST_S, "retry": NO_RETRY}
        options[f"{kind}_write"] = {"timeout_s": 4 * LATEST_S}
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
    # for trickle: the cancelled call leaves its line unended, and the "ok" answer written after it
    # is glued to that junk; it is read whole, the first time (ok is never retried)
    write = _call(rt, f"{kind}_write")
    assert write.error is not None and write.error.category == "unknown_commit", write.error
    (entry,) = [e for e in rt.ledger.list() if e.tool.startswith(f"{kind}_write@")]
    assert entry.attempts == 1 and entry.state == "unknown_commit"  # never sent twice


@pytest.mark.parametrize("name", ["twice", "twice_write"])
def test_an_answer_sent_twice_is_taken_once(rt: Runtime, name: str) -> None:
    obs = _call(rt, name)
    assert obs.status == "ok" and obs.data == "forged", obs.error
    obs = _call(rt, "ok")  # the second copy never passes for a later call's answer
    assert obs.data == "fine"


@pytest.mark.parametrize("kind", MALFORMED)
def test_an_answer_against_the_protocol_is_malformed_at_once_never_retried(rt: Runtime, kind: str) -> None:
    read = _call(rt, kind)
    assert read.error is not None and read.error.category == "permanent", read.error
    assert read.error.vendor_code == "jsonrpc:-32091" and read.error.details["error"] == "malformed_answer"
    assert read.error.recovery and not read.error.retryable
    write = _call(rt, f"{kind}_write")
    assert write.error is not None and write.error.category == "unknown_commit", write.error
    # answered at once and refused, not at its timeout: _call bounds it to a quarter of that
    (entry,) = [e for e in rt.ledger.list() if e.tool.startswith(f"{kind}_write@")]
    assert entry.attempts == 1 and entry.state == "unknown_commit"  # never sent twice
