"""An answer small in bytes but huge in structure (a million empty content blocks fit the 32 MiB
bound) is refused before it is parsed: a typed error at once, never gigabytes and minutes on the
server's connection; a write is ``unknown_commit`` and never re-sent; a long text that merely
holds braces is not refused."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters._mcp_bounds import MAX_CONTAINERS, too_structured
from actionspace.adapters.mcp_client import HttpServer, McpServer, StdioServer
from actionspace.catalog.spec import RetryPolicy

PROGRAM = str(Path(__file__).with_name("test_w12_mcp_blocks_program.py"))
BLOCKS = MAX_CONTAINERS + 50_000
"""Content blocks in an overstructured answer: about 4 MB, far within the byte bound."""
_ONCE = {name: {"retry": RetryPolicy(max_attempts=1)} for name in ("blocks", "braces")}


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


def _stdio(notes: Path) -> StdioServer:
    return StdioServer(
        sys.executable,
        args=(PROGRAM, "stdio"),
        name="w12",
        env={"W12_NOTES": str(notes)},
        allowlisted=True,
        timeout_s=120.0,
        connect_timeout_s=120.0,
        tool_options=_ONCE,
    )


@pytest.fixture(params=["stdio", "http-sse", "http-json"])
def server(request: pytest.FixtureRequest, notes: Path) -> Iterator[McpServer]:
    if request.param == "stdio":
        yield _stdio(notes)
        return
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    extra = ["json"] if request.param == "http-json" else []
    proc = subprocess.Popen(
        [sys.executable, PROGRAM, "http", str(sock.fileno()), *extra],
        pass_fds=[sock.fileno()],
        env={"W12_NOTES": str(notes), "PATH": "/usr/bin:/bin"},
    )
    sock.close()
    try:
        yield HttpServer(
            f"http://127.0.0.1:{port}/mcp",
            name="w12",
            allowlisted=True,
            timeout_s=120.0,
            connect_timeout_s=120.0,
            tool_options=_ONCE,
        )
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime("memory://", recover_on_start=False)
    try:
        yield runtime
    finally:
        runtime.close()


def test_an_answer_of_too_many_content_blocks_is_refused_unparsed_and_the_server_keeps_serving(
    rt: Runtime, server: McpServer
) -> None:
    rt.add_mcp_server(server)
    obs = rt.call({"name": "blocks", "arguments": {"n": BLOCKS}}, run_id=rt.new_run())
    assert obs.error is not None, obs.data if isinstance(obs.data, str) else type(obs.data)
    assert obs.error.category == "permanent", obs.error
    assert obs.error.details["error"] == "result_too_large"
    assert str(MAX_CONTAINERS) in obs.error.message
    after = rt.call({"name": "ok", "arguments": {}}, run_id=rt.new_run())
    assert after.status == "ok" and after.data == "fine", after.error


def test_an_answer_within_the_bound_is_served_whole(rt: Runtime, server: McpServer) -> None:
    rt.add_mcp_server(server)
    obs = rt.call({"name": "blocks", "arguments": {"n": 1000}}, run_id=rt.new_run())
    assert obs.status == "ok", obs.error


def test_an_overstructured_answer_to_a_write_is_unknown_commit_and_never_sent_again(
    rt: Runtime, notes: Path
) -> None:
    rt.add_mcp_server(_stdio(notes))
    run = rt.new_run()
    call = {"name": "blocks_write", "arguments": {"n": BLOCKS}}
    first = rt.call(call, run_id=run)
    assert first.error is not None and first.error.category == "unknown_commit", first.error
    again = rt.call(call, run_id=run)
    assert again.error is not None and again.error.category == "unknown_commit", again.error
    assert notes.read_text() == "written\n"


def test_a_long_text_full_of_braces_is_a_string_and_is_not_refused(rt: Runtime, notes: Path) -> None:
    rt.add_mcp_server(_stdio(notes))
    obs = rt.call({"name": "braces", "arguments": {"n": 3 * MAX_CONTAINERS}}, run_id=rt.new_run())
    assert obs.status == "ok", obs.error


_text = st.text(alphabet=st.sampled_from('{}[]"\\ax,:é\n'), max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=30,
)


def _containers(value: Any) -> int:
    if isinstance(value, list):
        return 1 + sum(_containers(v) for v in value)
    if isinstance(value, dict):
        return 1 + sum(_containers(v) for v in value.values())
    return 0


@settings(max_examples=300, deadline=None)
@given(value=_json, limit=st.integers(min_value=0, max_value=12), ascii_only=st.booleans())
def test_the_count_takes_objects_and_arrays_and_never_what_strings_hold(
    value: Any, limit: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    expected = _containers(value) > limit
    assert too_structured(text, limit) is expected
    assert too_structured(text.encode(), limit) is expected
