"""Answers that name their request badly, from real server processes: a raw stdio program
(``test_w17_hostile_ids_program.py``) and the raw HTTP one of ``test_w64_hostile_http_program.py``.

An answer with a null or missing id ends the one call in flight at once: as the server's parse error
when it says it could not read the request (a write known not to have run), as ``malformed_answer``
otherwise (a write ``unknown_commit``). With two calls in flight it ends neither. An answer under the
request's id as a string is no answer to it (JSON-RPC: the same value and type): the call ends at once
as ``malformed_answer``, over stdio and over HTTP, instead of taking the forged result. A line holding
more glued message starts than its byte budget reads ends the call it names at once, typed.

"At once" is told by how a call ended, not by a clock: the executor's timeout ended none of them
(``mcp_work.Timeouts``), and the glued line was parsed within its budget (``mcp_work.ReadWork``).
"""

from __future__ import annotations

import concurrent.futures
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_answers import GLUED_BUDGET_BYTES
from actionspace.adapters.mcp_client import HttpServer, StdioServer
from actionspace.catalog.spec import NO_RETRY
from tests.adapters.mcp_work import ReadWork, Timeouts
from tests.adapters.test_w64_mcp_http_hostile_answers import start_program

PROGRAM = str(Path(__file__).with_name("test_w17_hostile_ids_program.py"))
ANSWERED_S = 120.0
"""The timeout of a call answered at once: far beyond its answer on any machine, so one that ends at
it was not answered (``Timeouts`` counts it)."""
WAIT_S = 120.0
"""How long the test waits for what comes within milliseconds (a held call's answer, a server's note)."""
SHORT_S = 1.0
MALFORMED = ("null_other", "no_id_result", "no_id_error", "string_id", "spaced_id")
"""Answers that name no request, or name it under another type: malformed."""


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("w17") / "notes.txt"


@pytest.fixture(scope="module")
def rt(notes: Path) -> Iterator[Runtime]:
    options: dict[str, dict[str, Any]] = {}
    for kind in ("ok", "null_parse", "hold", "glued", *MALFORMED):
        options[kind] = {"timeout_s": ANSWERED_S, "retry": NO_RETRY}
        options[f"{kind}_write"] = {"timeout_s": ANSWERED_S}
    options["null_again"] = {"timeout_s": SHORT_S, "retry": NO_RETRY}
    runtime = Runtime("memory://", recover_on_start=False)
    server = StdioServer(
        sys.executable,
        args=(PROGRAM, str(notes)),
        name="ids",
        allowlisted=True,
        tool_options=options,
        connect_timeout_s=120.0,
        mode="legacy",
    )
    try:
        runtime.add_mcp_server(server)
        yield runtime
    finally:
        runtime.close()


@pytest.fixture
def timeouts(monkeypatch: pytest.MonkeyPatch) -> Timeouts:
    return Timeouts(monkeypatch)


def _call(rt: Runtime, timeouts: Timeouts, name: str, **arguments: Any) -> Observation:
    obs = rt.call({"name": name, "arguments": arguments}, run_id=rt.new_run())
    assert timeouts.by_tool[name] == 0, f"{name} waited for its timeout"
    after = rt.call({"name": "ok", "arguments": {}})
    assert after.status == "ok" and after.data == "fine", after.error  # the session goes on
    return obs


def _sent_once(rt: Runtime, notes: Path, name: str) -> str:
    (entry,) = [e for e in rt.ledger.list() if e.tool.startswith(f"{name}@")]
    assert entry.attempts == 1 and notes.read_text().splitlines().count(name) == 1  # never re-sent
    return entry.state


def test_a_parse_error_with_a_null_id_ends_the_one_call_in_flight_at_once_as_not_run(
    rt: Runtime, notes: Path, timeouts: Timeouts
) -> None:
    read = _call(rt, timeouts, "null_parse")
    assert read.error is not None and read.error.category == "internal", read.error
    assert read.error.vendor_code == "jsonrpc:-32700"
    write = _call(rt, timeouts, "null_parse_write")
    assert write.error is not None and write.error.category == "internal", write.error  # did not run
    assert _sent_once(rt, notes, "null_parse_write") != "unknown_commit"


@pytest.mark.parametrize("kind", MALFORMED)
def test_an_answer_naming_no_request_or_its_id_as_a_string_is_malformed_at_once(
    rt: Runtime, notes: Path, timeouts: Timeouts, kind: str
) -> None:
    read = _call(rt, timeouts, kind)
    assert read.status == "error" and read.data != "forged"
    assert read.error is not None and read.error.category == "permanent", read.error
    assert read.error.details["error"] == "malformed_answer" and not read.error.retryable
    write = _call(rt, timeouts, f"{kind}_write")
    assert write.error is not None and write.error.category == "unknown_commit", write.error
    assert _sent_once(rt, notes, f"{kind}_write") == "unknown_commit"


def test_an_answer_without_an_id_while_two_calls_are_in_flight_ends_neither(
    rt: Runtime, notes: Path, timeouts: Timeouts
) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(rt.call, {"name": "hold", "arguments": {}})
        deadline = time.monotonic() + WAIT_S
        while "hold" not in notes.read_text().splitlines():  # the held call is in flight
            assert time.monotonic() < deadline and not held.done(), "hold never reached the server"
            time.sleep(0.01)
        # the null-id error could answer either call: it ends neither; the second ends at its timeout
        started = time.monotonic()
        second = rt.call({"name": "null_again", "arguments": {}})
        assert time.monotonic() - started >= SHORT_S * 0.9
        assert second.error is not None and second.error.category == "transient", second.error
        assert timeouts.by_tool["null_again"] == 1  # ended by its timeout, not by the null-id error
        first = held.result(timeout=WAIT_S)  # answered once the second call was cancelled
    assert first.status == "ok" and first.data == "held", first.error


def test_a_line_with_more_glued_starts_than_its_budget_ends_the_call_it_names_at_once(
    rt: Runtime, timeouts: Timeouts, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 30 starts, each the head of an array running to the line's end: the answer behind them is
    # not read (that would parse the 30 MiB line 30 times), but its call ends typed, not at its timeout
    work = ReadWork(monkeypatch)
    read = _call(rt, timeouts, "glued", starts=30, mb=30)
    assert read.error is not None and read.error.category == "permanent", read.error
    assert read.error.details["error"] == "malformed_answer"
    line = (30 << 20) + 4096  # the glued line (its answer, "junk") and the ok call's lines after it
    # the line whole once, then its glued tries within their budget (two lengths): 3 in all, not 30
    assert 30 << 20 <= work.parsed_bytes <= 3 * line + GLUED_BUDGET_BYTES, work.parsed_bytes
    few = _call(rt, timeouts, "glued", starts=1, mb=1)  # within the budget: read whole, as before
    assert few.status == "ok" and few.data == "glued", few.error


@pytest.fixture
def http_rt(tmp_path: Path) -> Iterator[Runtime]:
    proc, url = start_program(tmp_path / "notes.txt")
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        server = HttpServer(url, name="w64", allowlisted=True, timeout_s=ANSWERED_S, mode="legacy")
        runtime.add_mcp_server(server)
        yield runtime
    finally:
        runtime.close()
        proc.kill()
        proc.wait(timeout=30)


@pytest.mark.parametrize("kind", ["string_id", "string_id_sse"])
def test_an_http_answer_under_the_id_as_a_string_is_malformed_at_once(http_rt: Runtime, kind: str) -> None:
    read = http_rt.call({"name": kind, "arguments": {}}, run_id=http_rt.new_run())
    assert read.error is not None and read.error.category == "permanent", (read.data, read.error)
    assert read.error.details["error"] == "malformed_answer"
    write = http_rt.call({"name": f"{kind}_write", "arguments": {}}, run_id=http_rt.new_run())
    assert write.error is not None and write.error.category == "unknown_commit", (write.data, write.error)
