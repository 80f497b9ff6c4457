"""A hostile client on the gateway's stdio: every request with an id gets one answer, nothing
else is answered, nothing ends the session, and huge inputs come back as bounded typed errors."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.gateway_sample_tools import count
from tests.adapters.gateway_support import EXE, desk_env, write_config

_DEADLINE_S = 30.0


class RawClient:
    """Lines in and out of ``actionspace gateway`` over stdio, read on a thread with deadlines."""

    def __init__(self, folder: Path) -> None:
        config = write_config(folder)
        self.proc = subprocess.Popen(
            [str(EXE), "gateway", "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=str(folder),
            env={**os.environ, **desk_env(folder)},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 1000

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, raw: str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        text = raw if isinstance(raw, str) else json.dumps(raw)
        self.proc.stdin.write(text.encode("utf-8", "surrogatepass") + b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any]:
        line = self.lines.get(timeout=_DEADLINE_S)
        assert line, "the gateway closed its output"
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, method: str, params: Any = None, **extra: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method, **extra}
        if params is not None:
            message["params"] = params
        self.send(message)
        got = self.answer()
        assert got.get("id") == self.next_id, got
        return got

    def still_serving(self) -> None:
        """A ping is the very next thing answered: nothing else was (or will be) sent back."""
        assert self.request("ping") == {"jsonrpc": "2.0", "id": self.next_id, "result": {}}

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def raw(tmp_path: Path) -> Iterator[RawClient]:
    client = RawClient(tmp_path)
    yield client
    client.close()


_INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "hostile", "version": "0"},
}


def _call(name: str, arguments: Any, meta: Any = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return params


def test_a_hostile_stdio_client_gets_typed_bounded_answers_and_the_session_survives(
    raw: RawClient, tmp_path: Path
) -> None:
    # before initialize: refused, not served
    early = raw.request("tools/call", _call("create_ticket", {"customer_id": "c1", "title": "early"}))
    assert early["error"]["code"] == -32602
    assert raw.request("tools/list")["error"]["code"] == -32602
    assert raw.request("nope/nothing")["error"]["code"] == -32601
    for junk in ("not json", "[]", '{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', "{" * 10_000):
        raw.send(junk)
    raw.still_serving()
    assert "result" in raw.request("initialize", _INIT)
    raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    for request_id in (424242, {"x": 1}, None):
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}})
    raw.still_serving()
    assert raw.request("tools/call", _call("lookup_customer", [1, 2]))["error"]["code"] == -32602

    def error_of(reply: dict[str, Any]) -> dict[str, Any]:
        result = reply["result"]
        assert result["isError"] is True, result
        assert len(json.dumps(reply)) < 20_000  # whatever came in, a bounded answer goes out
        error: dict[str, Any] = result["structuredContent"]["error"]
        return error

    huge_name = raw.request("tools/call", _call("x" * 1_000_000, {}))
    assert error_of(huge_name)["category"] == "unknown_tool"
    huge_arg = raw.request(
        "tools/call", _call("create_ticket", {"customer_id": "c" * 3_000_000, "title": "t"})
    )
    assert error_of(huge_arg)["category"] == "invalid_arguments"
    foreign = raw.request(
        "tools/call", _call("lookup_customer", {"customer_id": "c1"}, {"actionspace/run_id": "mcp_0"})
    )
    assert error_of(foreign)["category"] == "permission_denied"
    written = raw.request(
        "tools/call", _call("create_ticket", {"customer_id": "c1", "title": "after all that"})
    )
    assert written["result"]["isError"] is False, written
    assert count("tickets", str(tmp_path / "desk.db")) == 1
