"""The JSON body of an error status, read within the bound by the transport's response hook, reaches the
SDK through the response's public ``stream``, not httpx2's private ``Response._content``:

* with ``_content`` refused to every caller but httpx2 itself (as a release renaming it would leave this
  client), a JSON-RPC error in a 400 body is still the call's error, a 500 whose body is a gzip bomb
  still ends the call without its reason, and the session goes on; before, the hook set ``_content``
  and each of those calls ended the session instead;
* the held body is what ``aread`` returns; the stream it came from is not read again, and is closed
  with the response (its unread rest drops the connection).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.adapters.test_w64_mcp_http_hostile_answers import call, served, start_program


@pytest.fixture
def endpoint(tmp_path: Path) -> Iterator[str]:
    notes = tmp_path / "notes.txt"
    notes.touch()
    proc, url = start_program(notes)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def without_private_content(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """httpx2's ``Response._content`` refused to any setter outside httpx2; the setters refused."""
    refused: list[str] = []

    def setattr_(self: httpx2.Response, name: str, value: Any) -> None:
        frame = inspect.currentframe()
        caller = str(frame.f_back.f_globals.get("__name__", "")) if frame and frame.f_back else ""
        if name == "_content" and not caller.startswith("httpx2"):
            refused.append(caller)
            raise AttributeError(f"'Response' object has no attribute {name!r}")
        object.__setattr__(self, name, value)

    monkeypatch.setattr(httpx2.Response, "__setattr__", setattr_)
    return refused


def test_an_error_status_body_reaches_the_sdk_without_httpx2s_private_content(
    endpoint: str, without_private_content: list[str]
) -> None:
    rt = served(endpoint, timeout_s=20.0)
    try:
        outcomes = {}
        for tool in ("error_json", "error_bomb", "ok"):
            _, obs = call(rt, tool)
            outcomes[tool] = obs.data if obs.error is None else (obs.error.category, obs.error.message)
    finally:
        rt.close()
    assert outcomes["error_json"] == ("invalid_arguments", "mb must be small"), outcomes
    assert outcomes["error_bomb"][0] == "unclassified", outcomes  # a 500 without its reason
    assert outcomes["ok"] == "fine", outcomes
    assert without_private_content == [], without_private_content


class _Raw(httpx2.AsyncByteStream):
    """A body stream that records whether it was read or closed."""

    def __init__(self) -> None:
        self.read = False
        self.closed = False

    async def __aiter__(self) -> Any:
        self.read = True
        yield b"never"

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.parametrize("body", [b'{"jsonrpc": "2.0"}', b""])
def test_a_held_body_is_what_aread_returns_and_its_stream_is_closed_unread(body: bytes) -> None:
    from actionspace.adapters._mcp_streams import Held  # new with the hook's public path

    raw = _Raw()
    response = httpx2.Response(400, stream=Held(body, raw), request=httpx2.Request("POST", "http://x/mcp"))
    assert anyio.run(response.aread) == body
    assert response.content == body
    assert (raw.read, raw.closed) == (False, True)
