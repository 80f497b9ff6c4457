"""Redirects answered by an MCP server over streamable HTTP, in both protocol eras: a redirect within
the endpoint's origin is followed a bounded number of times without reading the redirect's own body
(however large, compressed or stalled); a loop, a redirect to another origin or to a scheme that is
not HTTP, a garbage Location and any other 3xx answer end their call as ``permanent`` (a redirect is
answered before the request is processed, so a write cannot have committed), and the session goes on."""

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

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types.version import LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION

from actionspace import Observation, Runtime
from actionspace.adapters._mcp_redirects import MAX_REDIRECTS, RedirectRefused, counting_redirects, redirected
from actionspace.adapters.mcp_client import HttpServer

PROGRAM = str(Path(__file__).with_name("test_w75_redirect_program.py"))
ERAS = [LATEST_HANDSHAKE_VERSION, LATEST_MODERN_VERSION]
SECRET_HEADERS = {"Authorization": "Bearer w75-secret", "X-Api-Key": "w75-key"}


def start_program(notes: Path, version: str) -> tuple[subprocess.Popen[bytes], str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    port = sock.getsockname()[1]
    env = {**os.environ, "W64_NOTES": str(notes)}
    proc = subprocess.Popen(
        [sys.executable, PROGRAM, str(sock.fileno()), version], pass_fds=[sock.fileno()], env=env
    )
    sock.close()
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(params=ERAS, scope="module")
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory, era: str) -> Path:
    path = tmp_path_factory.mktemp(f"w75-{era}") / "notes.txt"
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
    server = HttpServer(url, name="w75", allowlisted=True, timeout_s=timeout_s, headers=SECRET_HEADERS)
    rt.add_mcp_server(server)
    return rt


@pytest.fixture(scope="module")
def rt(endpoint: str) -> Iterator[Runtime]:
    runtime = served(endpoint, timeout_s=10.0)
    try:
        yield runtime
    finally:
        runtime.close()


def call(rt: Runtime, name: str, **arguments: object) -> tuple[float, Observation]:
    started = time.monotonic()
    obs = rt.call({"name": name, "arguments": arguments}, run_id=rt.new_run())
    return time.monotonic() - started, obs


def requests_of(notes: Path, name: str) -> list[str]:
    return [line for line in notes.read_text().splitlines() if line.startswith(f"{name} ")]


def assert_still_serving(rt: Runtime) -> None:
    took, obs = call(rt, "ok")
    assert took < 5.0
    assert obs.status == "ok" and obs.data == "fine", obs.error


def assert_refused(rt: Runtime, notes: Path, tool: str, most_requests: int = 1) -> Observation:
    before = len(requests_of(notes, tool))
    took, obs = call(rt, tool)
    assert took < 5.0, took
    assert obs.error is not None, obs
    assert obs.error.category == "permanent", obs.error
    assert obs.error.details["error"] == "redirect_refused", obs.error
    assert obs.error.retryable is False
    assert 1 <= len(requests_of(notes, tool)) - before <= most_requests  # never asked again
    assert_still_serving(rt)
    return obs


@pytest.mark.parametrize("tool", ["moved", "moved_write"])
def test_a_redirect_within_the_origin_is_followed_with_the_same_request(
    rt: Runtime, notes: Path, endpoint: str, tool: str
) -> None:
    _, obs = call(rt, tool)
    assert obs.status == "ok" and obs.data == "moved fine", obs.error
    host = httpx2.URL(endpoint).netloc.decode()
    assert requests_of(notes, tool)[-2:] == [f"{tool} /mcp {host} auth", f"{tool} /mcp/moved {host} auth"]


def test_a_redirect_whose_body_never_comes_is_followed_at_once(endpoint: str) -> None:
    """A client that waited for the redirect's body would wait out the call's 30 s and fail it; the
    bound on the time taken is far below that, and far above what a loaded machine needs."""
    runtime = served(endpoint, timeout_s=30.0)
    try:
        took, obs = call(runtime, "stall_moved_write")
        assert obs.status == "ok" and obs.data == "moved fine", obs.error
        assert took < 15.0, took
    finally:
        runtime.close()


@pytest.mark.parametrize("tool", ["loop", "loop_write"])
def test_a_redirect_loop_ends_after_five_hops_as_permanent(rt: Runtime, notes: Path, tool: str) -> None:
    obs = assert_refused(rt, notes, tool, most_requests=6)
    assert obs.error is not None and "redirect" in obs.error.message


@pytest.mark.parametrize("tool", ["cross_origin", "cross_origin_write"])
def test_a_redirect_to_another_origin_is_refused_and_nothing_is_sent_there(
    rt: Runtime, notes: Path, tool: str
) -> None:
    obs = assert_refused(rt, notes, tool)
    assert not [line for line in requests_of(notes, tool) if " localhost:" in line]
    assert obs.error is not None and "localhost" in obs.error.message  # the user may configure that URL
    assert "w75-secret" not in json.dumps(obs.to_dict())


@pytest.mark.parametrize(
    "tool", ["see_other", "ftp", "javascript", "data", "garbage_location", "no_location", "multiple_choices"]
)
def test_a_redirect_that_cannot_be_followed_is_permanent_for_reads_and_writes(
    rt: Runtime, notes: Path, tool: str
) -> None:
    assert_refused(rt, notes, tool)
    assert_refused(rt, notes, f"{tool}_write")


def test_httpx_drops_only_the_authorization_header_on_a_redirect_to_another_origin() -> None:
    """Why a redirect to another origin is refused rather than followed: a token in any other header
    would go along to whatever host the server names."""
    client = httpx2.Client(headers=SECRET_HEADERS)
    request = client.build_request("POST", "http://127.0.0.1:9/mcp", json={})
    response = httpx2.Response(307, headers={"location": "http://evil.example/mcp"}, request=request)
    moved = client._build_redirect_request(request, response)
    assert "authorization" not in moved.headers
    assert moved.headers["x-api-key"] == "w75-key"
    client.close()


_CLIENT = """
import json, resource, sys
def _hwm_mb():  # this process's own peak (ru_maxrss keeps the forking parent's across exec)
    with open("/proc/self/status") as f:
        return int(next(x for x in f if x.startswith("VmHWM")).split()[1]) // 1024

resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from actionspace import Runtime
from actionspace.adapters._mcp_redirects import MAX_REDIRECTS, RedirectRefused, counting_redirects, redirected
from actionspace.adapters.mcp_client import HttpServer
rt = Runtime("memory://", recover_on_start=False)
rt.add_mcp_server(HttpServer(sys.argv[1], name="w75", allowlisted=True, timeout_s=60.0))
first = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
out = {"first": first.data, "base_mb": _hwm_mb()}
for tool in sys.argv[2:]:
    obs = rt.call({"name": tool, "arguments": {"mb": 400}}, run_id=rt.new_run())
    out[tool] = [obs.error and obs.error.to_dict(), obs.data]
out["peak_mb"] = _hwm_mb()
rt.close()
print(json.dumps(out))
"""

_GROWTH_MB = 200
"""Peak RSS growth of the client over a 5 GB gzip bomb and a 400 MB plain body sent with redirects."""


def test_a_huge_or_inflating_redirect_body_is_not_read_and_memory_stays_bounded(endpoint: str) -> None:
    tools = ["bomb_moved", "huge_moved_write"]
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, endpoint, *tools], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert out["first"] == "fine"
    for tool in tools:
        assert out[tool] == [None, "moved fine"], (tool, out[tool])
    assert out["peak_mb"] - out["base_mb"] < _GROWTH_MB, out


_ORIGIN = "http://127.0.0.1:8000/mcp"


@settings(max_examples=200, deadline=None)
@given(
    status=st.sampled_from([300, 301, 302, 303, 304, 307, 308, 399]),
    location=st.one_of(
        st.text(st.characters(max_codepoint=255), max_size=60),
        st.sampled_from(["/mcp/v2", "https://127.0.0.1/mcp", "//127.0.0.1:8000/x", "http://127.0.0.1:8000"]),
    ),
)
def test_any_location_is_followed_within_the_origin_or_refused_and_nothing_else(
    status: int, location: str
) -> None:
    client = httpx2.AsyncClient()
    request = client.build_request("POST", _ORIGIN, json={})
    raw = [(b"location", location.encode("latin-1"))]
    response = httpx2.Response(status, headers=raw, request=request, stream=httpx2.ByteStream(b"x" * 100))
    with counting_redirects():
        try:
            redirected(client, response)
        except RedirectRefused as exc:
            assert str(exc).startswith(f"the server answered {status}, not followed")
            return
    assert status in (307, 308)  # a POST keeps its method only through these
    following = client._build_redirect_request(request, response)
    assert following.url.host == "127.0.0.1" and following.url.scheme in ("http", "https")
    assert following.method == "POST"


def test_the_sixth_redirect_in_a_row_is_refused() -> None:
    client = httpx2.AsyncClient()
    request = client.build_request("POST", _ORIGIN, json={})
    with counting_redirects():
        for _ in range(MAX_REDIRECTS):
            redirected(client, httpx2.Response(307, headers={"location": "/mcp"}, request=request))
        with pytest.raises(RedirectRefused, match="redirect 6 in a row"):
            redirected(client, httpx2.Response(307, headers={"location": "/mcp"}, request=request))
    with counting_redirects():  # the next request counts anew
        redirected(client, httpx2.Response(307, headers={"location": "/mcp"}, request=request))
