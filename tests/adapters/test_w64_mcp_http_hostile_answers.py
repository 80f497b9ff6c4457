"""Calls to a hostile MCP server over streamable HTTP: every misbehaving answer ends its call as a
typed error at once (or within the call's timeout), memory stays bounded, a write is never re-sent,
and the next call to the same server still works."""

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

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_http import MAX_MESSAGE_BYTES
from actionspace.adapters.mcp_client import HttpServer
from tests.adapters.mcp_http_work import HttpReadWork
from tests.adapters.mcp_work import Timeouts, ending

PROGRAM = str(Path(__file__).with_name("test_w64_hostile_http_program.py"))


def start_program(notes: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The hostile server on a free port, and its MCP endpoint."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    env = {**os.environ, "W64_NOTES": str(notes)}
    proc = subprocess.Popen([sys.executable, PROGRAM, str(sock.fileno())], pass_fds=[sock.fileno()], env=env)
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


@pytest.fixture
def endpoint(notes: Path) -> Iterator[str]:
    proc, url = start_program(notes)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


def served(url: str, timeout_s: float) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_mcp_server(HttpServer(url, name="w64", allowlisted=True, timeout_s=timeout_s, mode="legacy"))
    return rt


@pytest.fixture
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


def assert_still_serving(rt: Runtime) -> None:
    # Answered "fine": a call the session left wedged would end at its 20 s timeout as an error, and
    # one held past it for good fails ``ending`` (60 s); no wall-clock bound on the answer itself.
    _, obs = ending(lambda: call(rt, "ok"))
    assert obs.status == "ok" and obs.data == "fine", obs.error


def calls_of(notes: Path, name: str) -> int:
    return notes.read_text().splitlines().count(name)


def wait_for_line(notes: Path, line: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if line in notes.read_text().splitlines():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("tool", ["huge_json", "huge_sse"])
def test_a_100_mb_answer_ends_its_read_at_once_as_result_too_large_and_is_asked_once(
    rt: Runtime, notes: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = HttpReadWork(monkeypatch)
    _, obs = call(rt, tool, mb=100)
    work.assert_stopped_at(MAX_MESSAGE_BYTES)  # a third of the answer at most: the rest never read
    assert obs.error is not None, obs
    assert obs.error.category == "permanent", obs.error
    assert obs.error.details["error"] == "result_too_large"
    assert calls_of(notes, tool) == 1  # permanent: never asked again
    assert_still_serving(rt)


def test_a_100_mb_answer_to_a_write_is_unknown_commit_and_sent_once(
    rt: Runtime, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = HttpReadWork(monkeypatch)
    _, obs = call(rt, "huge_json_write", mb=100)
    work.assert_stopped_at(MAX_MESSAGE_BYTES)
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert calls_of(notes, "huge_json_write") == 1
    assert_still_serving(rt)


def test_an_sse_answer_within_the_bound_is_taken_whole_as_over_stdio(rt: Runtime) -> None:
    _, obs = call(rt, "huge_sse", mb=8)
    assert obs.status == "ok", obs.error
    assert obs.complete is False and obs.artifact_ref is not None


@pytest.mark.parametrize("tool", ["wrong_id", "wrong_id_sse", "bad_utf8", "both", "both_sse"])
def test_an_answer_for_another_id_or_not_json_ends_a_read_at_once_as_permanent(
    rt: Runtime, notes: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeouts = Timeouts(monkeypatch)
    _, obs = ending(lambda: call(rt, tool))
    assert not timeouts.by_tool and timeouts.answer_deadlines == 0  # the answer ended it, no timeout did
    assert obs.error is not None, obs
    assert obs.error.category == "permanent", obs.error
    assert obs.error.details["error"] == "malformed_answer"
    assert calls_of(notes, tool) == 1
    assert_still_serving(rt)


@pytest.mark.parametrize(
    "tool", ["wrong_id_write", "wrong_id_sse_write", "bad_utf8_write", "both_write", "both_sse_write"]
)
def test_a_malformed_answer_to_a_write_is_unknown_commit_at_once_and_never_resent(
    rt: Runtime, notes: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = rt.new_run()
    timeouts = Timeouts(monkeypatch)
    obs = ending(lambda: rt.call({"name": tool, "arguments": {}}, run_id=run))
    assert not timeouts.by_tool and timeouts.answer_deadlines == 0  # the answer ended it, no timeout did
    assert obs.error is not None and obs.error.category == "unknown_commit", obs.error
    again = rt.call({"name": tool, "arguments": {}}, run_id=run)
    assert again.error is not None and again.error.category == "unknown_commit"
    assert calls_of(notes, tool) == 1
    assert_still_serving(rt)


def test_a_connection_cut_mid_answer_fails_the_call_and_not_the_session(rt: Runtime, notes: Path) -> None:
    _, obs = call(rt, "cut_write")
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert calls_of(notes, "cut_write") == 1
    assert_still_serving(rt)


@pytest.mark.parametrize("tool", ["stall_write", "spaces_json_write", "keepalive_sse_write"])
def test_an_answer_that_never_ends_ends_the_write_at_its_timeout_and_its_stream_is_closed(
    endpoint: str, notes: Path, tool: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # told by what ended the call, not by a clock (``mcp_work``): a timer of 2 s ended it, after the
    # 2 s, and the bytes that keep coming did not hold it past
    timeouts = Timeouts(monkeypatch)
    runtime = served(endpoint, timeout_s=2.0)
    try:
        took, obs = ending(lambda: call(runtime, tool))
        assert took >= 2.0, took  # nothing ended it before its timeout
        assert timeouts.limits in ([2.0], []) and timeouts.by_tool.keys() <= {tool}, timeouts.limits
        assert timeouts.by_tool[tool] + timeouts.answer_deadlines >= 1  # a timeout ended it
        assert obs.error is not None and obs.error.category == "unknown_commit", obs
        assert calls_of(notes, tool) == 1
        assert wait_for_line(notes, f"closed {tool}", within_s=60.0)  # nothing keeps reading it
        assert_still_serving(runtime)
    finally:
        runtime.close()


_CLIENT = """
import json, resource, sys
def _hwm_mb():  # this process's own peak (ru_maxrss keeps the forking parent's across exec)
    with open("/proc/self/status") as f:
        return int(next(x for x in f if x.startswith("VmHWM")).split()[1]) // 1024

resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from actionspace import Observation, Runtime
from actionspace.adapters.mcp_client import HttpServer
rt = Runtime("memory://", recover_on_start=False)
rt.add_mcp_server(HttpServer(sys.argv[1], name="w64", allowlisted=True, timeout_s=20.0, mode="legacy"))
out = {}
for tool in sys.argv[2:]:
    obs = rt.call({"name": tool, "arguments": {"mb": 100}}, run_id=rt.new_run())
    after = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    out[tool] = [obs.error and obs.error.to_dict(), after.data]
out["rss_mb"] = _hwm_mb()
rt.close()
print(json.dumps(out))
"""


_BOUNDED_MB = 300
"""Peak RSS of the client (VmHWM, its own: ru_maxrss keeps the forking worker's across exec): far
below the 10 GB a bomb inflates to; its start-up (about 100 MB) and less than 200 MB more, since a
body is inflated in bounded pieces as it is read, never a network chunk whole."""


def run_client(endpoint: str, tools: list[str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, endpoint, *tools], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out


def test_gzip_bombs_and_huge_answers_keep_the_client_memory_bounded(endpoint: str) -> None:
    tools = ["gzip_json", "gzip_sse", "huge_json", "huge_sse"]
    out = run_client(endpoint, tools)
    for tool in tools:
        error, after = out[tool]
        assert error is not None and error["category"] == "permanent", (tool, error)
        assert error["details"]["error"] == "result_too_large", (tool, error)
        assert after == "fine", tool
    assert out["rss_mb"] < _BOUNDED_MB, out


def test_a_gzip_bomb_as_an_error_status_body_is_not_inflated_and_the_server_keeps_serving(
    endpoint: str,
) -> None:
    out = run_client(endpoint, ["error_bomb"])
    error, after = out["error_bomb"]
    assert error is not None and error["category"] == "unclassified", error  # a 500 without its reason
    assert after == "fine"
    assert out["rss_mb"] < _BOUNDED_MB, out


def test_a_json_rpc_error_in_an_error_status_body_is_still_read(rt: Runtime) -> None:
    _, obs = call(rt, "error_json")
    assert obs.error is not None and obs.error.category == "invalid_arguments", obs
    assert obs.error.message == "mb must be small"
