"""A hostile MCP server over streamable HTTP, at the newest protocol revision of the installed SDK and
at the newest handshake-era one: every misbehaving answer ends its call as a typed error, an answer in
a content coding the client does not decode is refused (never read as if it were plain), a broken
compressed answer is malformed rather than a lost connection, and a gzip bomb keeps the client's
memory near the 32 MiB bound."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_http import MAX_MESSAGE_BYTES
from actionspace.adapters.mcp_client import HttpServer
from actionspace.execution.executor import Executor
from tests.adapters.mcp_http_work import HttpReadWork
from tests.adapters.mcp_work import Timeouts, ending

PROGRAM = str(Path(__file__).with_name("test_w70_hostile_http_program.py"))
ERAS = [LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION]
STALL_TIMEOUT_S = 2.0
WAIT_S = 60.0
"""How long a server's notes are polled for what comes within milliseconds."""


def start_program(notes: Path, version: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    env = {**os.environ, "W64_NOTES": str(notes)}
    argv = [sys.executable, PROGRAM, str(sock.fileno()), version]
    proc = subprocess.Popen(argv, pass_fds=[sock.fileno()], env=env)
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(params=ERAS, scope="module")
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory, era: str) -> Path:
    path = tmp_path_factory.mktemp(f"w70-{era}") / "notes.txt"
    path.touch()
    return path


@pytest.fixture(scope="module")
def endpoint(notes: Path, era: str) -> Iterator[str]:
    proc, url = start_program(notes, era)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


def served(url: str, timeout_s: float) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_mcp_server(HttpServer(url, name="w70", allowlisted=True, timeout_s=timeout_s, mode="auto"))
    return rt


@pytest.fixture(scope="module")
def rt(endpoint: str) -> Iterator[Runtime]:
    runtime = served(endpoint, timeout_s=20.0)
    try:
        yield runtime
    finally:
        runtime.close()


def call(rt: Runtime, name: str, **arguments: object) -> tuple[float, Observation]:
    started = time.monotonic()
    obs = rt.call({"name": name, "arguments": arguments}, run_id=rt.new_run())
    return time.monotonic() - started, obs


def lines(notes: Path) -> list[str]:
    return notes.read_text().splitlines()


def assert_still_serving(rt: Runtime) -> None:
    # Answered "fine": a call the session left wedged would end at its 20 s timeout as an error, and
    # one held past it for good fails ``ending`` (60 s); no wall-clock bound on the answer itself.
    _, obs = ending(lambda: call(rt, "ok"))
    assert obs.status == "ok" and obs.data == "fine", obs.error


class Work:
    """What the client did for a call: what it read and parsed (:class:`HttpReadWork`), and whether
    a timeout ended it (:class:`Timeouts`)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.read = HttpReadWork(monkeypatch)
        self.timeouts = Timeouts(monkeypatch)

    def timed_out(self) -> int:
        return sum(self.timeouts.by_tool.values()) + self.timeouts.answer_deadlines


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Work:
    return Work(monkeypatch)


def assert_refused_once(rt: Runtime, notes: Path, tool: str, category: str, error: str, work: Work) -> None:
    before, timed_out = lines(notes).count(tool), work.timed_out()
    work.read.reset()
    _, obs = call(rt, tool, mb=100)
    work.read.assert_stopped_at(MAX_MESSAGE_BYTES)  # of a 100 MB answer, a third at most: the rest unread
    assert work.timed_out() == timed_out  # the answer ended the call, not the call's timeout
    assert obs.error is not None, obs
    assert obs.error.category == category, obs.error
    if category != "unknown_commit":  # an unknown commit names the ledger's reason, not the answer's
        assert obs.error.details["error"] == error, obs.error
    assert lines(notes).count(tool) == before + 1  # never asked again
    assert_still_serving(rt)


def test_the_client_speaks_the_era_the_server_advertises(rt: Runtime, notes: Path, era: str) -> None:
    assert_still_serving(rt)
    handshake = "method initialize" in lines(notes)
    assert handshake == (era == LATEST_HANDSHAKE_VERSION)


@pytest.mark.parametrize("tool", ["huge_json", "huge_sse"])
def test_a_100_mb_answer_is_result_too_large_in_every_era(
    rt: Runtime, notes: Path, tool: str, work: Work
) -> None:
    assert_refused_once(rt, notes, tool, "permanent", "result_too_large", work)
    assert_refused_once(rt, notes, f"{tool}_write", "unknown_commit", "result_too_large", work)


@pytest.mark.parametrize("tool", ["wrong_id", "wrong_id_sse", "bad_utf8"])
def test_an_answer_for_another_id_or_not_json_is_malformed_in_every_era(
    rt: Runtime, notes: Path, tool: str, work: Work
) -> None:
    assert_refused_once(rt, notes, tool, "permanent", "malformed_answer", work)
    assert_refused_once(rt, notes, f"{tool}_write", "unknown_commit", "malformed_answer", work)


def test_a_connection_cut_mid_answer_fails_the_write_and_not_the_session(rt: Runtime, notes: Path) -> None:
    before = lines(notes).count("cut_write")
    _, obs = call(rt, "cut_write")
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert lines(notes).count("cut_write") == before + 1
    assert_still_serving(rt)


def test_a_json_rpc_error_in_an_error_status_body_is_read_in_every_era(rt: Runtime) -> None:
    _, obs = call(rt, "error_json")
    assert obs.error is not None and obs.error.category == "invalid_arguments", obs
    assert obs.error.message == "mb must be small"


@pytest.mark.parametrize("tool", ["stall_write", "spaces_json_write", "keepalive_sse_write"])
def test_an_answer_that_never_ends_ends_the_write_at_its_timeout_in_every_era(
    endpoint: str, notes: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # told by what ended the call, not by a clock: a timer of 2 s (the call's, or the answer's
    # deadline in the transport) ended it, after the 2 s, and the bytes that keep coming did not
    # hold it past (``ending``); the server saw its connection closed
    timeouts = Timeouts(monkeypatch)
    runtime = served(endpoint, timeout_s=STALL_TIMEOUT_S)
    try:
        before = lines(notes).count(tool)
        took, obs = ending(lambda: call(runtime, tool))
        assert took >= STALL_TIMEOUT_S, took  # nothing ended it before its timeout
        assert timeouts.limits in ([STALL_TIMEOUT_S], []) and timeouts.by_tool.keys() <= {tool}
        assert timeouts.by_tool[tool] + timeouts.answer_deadlines >= 1  # a timeout ended it
        assert obs.error is not None and obs.error.category == "unknown_commit", obs
        assert lines(notes).count(tool) == before + 1
        deadline = time.monotonic() + WAIT_S
        while lines(notes).count(f"closed {tool}") <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lines(notes).count(f"closed {tool}") > before  # nothing keeps reading it
        assert_still_serving(runtime)
    finally:
        runtime.close()


@pytest.mark.parametrize("tool", ["gzip_ok", "deflate_ok", "raw_deflate_ok", "identity_ok", "two_members_ok"])
def test_an_answer_in_gzip_deflate_or_identity_coding_is_read(rt: Runtime, tool: str) -> None:
    _, obs = call(rt, tool)
    assert obs.status == "ok" and obs.data == "fine", obs.error
    _, obs = call(rt, f"{tool}_write")
    assert obs.status == "ok" and obs.data == "fine", obs.error


@pytest.mark.parametrize("tool", ["brotli_ok", "unknown_ok", "double_unknown_ok", "brotli_sse"])
def test_an_answer_in_a_coding_the_client_does_not_decode_is_malformed_and_asked_once(
    rt: Runtime, notes: Path, tool: str, work: Work
) -> None:
    assert_refused_once(rt, notes, tool, "permanent", "malformed_answer", work)
    assert_refused_once(rt, notes, f"{tool}_write", "unknown_commit", "malformed_answer", work)


@pytest.mark.parametrize("tool", ["corrupt_gzip", "corrupt_gzip_sse", "cut_gzip"])
def test_a_broken_compressed_answer_is_malformed_and_never_retried(
    rt: Runtime, notes: Path, tool: str, work: Work
) -> None:
    assert_refused_once(rt, notes, tool, "permanent", "malformed_answer", work)
    assert_refused_once(rt, notes, f"{tool}_write", "unknown_commit", "malformed_answer", work)


_CLIENT = """
import json, resource, sys
def _hwm_mb():  # this process's own peak (ru_maxrss keeps the forking parent's across exec)
    with open("/proc/self/status") as f:
        return int(next(x for x in f if x.startswith("VmHWM")).split()[1]) // 1024

resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from actionspace import Runtime
from actionspace.adapters._mcp_http import MAX_MESSAGE_BYTES
from actionspace.adapters.mcp_client import HttpServer
from actionspace.execution.executor import Executor
from tests.adapters.mcp_http_work import HttpReadWork
from tests.adapters.mcp_work import Timeouts, ending
rt = Runtime("memory://", recover_on_start=False)
rt.add_mcp_server(HttpServer(sys.argv[1], name="w70", allowlisted=True, timeout_s=20.0, mode="auto"))
first = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
out = {"first": first.data, "base_mb": _hwm_mb()}
for tool in sys.argv[2:]:
    obs = rt.call({"name": tool, "arguments": {"mb": 100}}, run_id=rt.new_run())
    after = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    out[tool] = [obs.error and obs.error.to_dict(), after.data]
out["peak_mb"] = _hwm_mb()
rt.close()
print(json.dumps(out))
"""

_GROWTH_MB = 200
"""Peak RSS growth of the client over a 3 GB and a 10 GB gzip bomb: near the 32 MiB bound, whatever
size the network chunks come in."""


def test_gzip_bombs_keep_the_client_memory_near_the_bound_in_every_era(endpoint: str) -> None:
    bombs = ["gzip_one_chunk", "gzip_json", "gzip_sse", "error_bomb"]
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, endpoint, *bombs], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert out["first"] == "fine"
    for tool in bombs:
        error, after = out[tool]
        assert error is not None, tool
        if tool == "error_bomb":  # a 500 whose body was dropped: answered from the status alone
            assert error["category"] == "unclassified", (tool, error)
        else:
            assert (error["category"], error["details"]["error"]) == ("permanent", "result_too_large"), error
        assert after == "fine", tool
    assert out["peak_mb"] - out["base_mb"] < _GROWTH_MB, out


def test_a_read_that_times_out_is_retried_by_its_policy_so_it_may_take_three_timeouts(
    endpoint: str, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # counted, not timed: three attempts, each ended by a timer of its own 1 s, with only the policy's
    # short waits (under one timeout in all) between them
    timeouts, waits = Timeouts(monkeypatch), []
    next_delay = Executor._next_delay

    def delay(*args: Any) -> float | None:
        waits.append(next_delay(*args))
        return waits[-1]

    monkeypatch.setattr(Executor, "_next_delay", staticmethod(delay))
    runtime = served(endpoint, timeout_s=1.0)
    try:
        before = lines(notes).count("stall")
        took, obs = ending(lambda: call(runtime, "stall"))
        assert obs.error is not None and obs.error.category == "transient", obs
        assert obs.error.details["attempts"] == 3
        assert lines(notes).count("stall") == before + 3  # one request per attempt, each its own timeout
        assert took >= 3.0, took  # each attempt waited its whole timeout
        assert set(timeouts.limits) <= {1.0} and timeouts.by_tool["stall"] + timeouts.answer_deadlines >= 3
        assert waits[-1] is None and sum(w or 0.0 for w in waits) < 1.0, waits
    finally:
        runtime.close()
