"""An approval given for an upstream tool as the gateway showed it does not let the call run once the
tool changed while the gateway was down (its versions numbered from "1" again): the call is held
again, on a request bound to the tool as it is now."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from actionspace import Runtime
from actionspace.adapters._gateway_config import UpstreamConfig, load_config
from actionspace.adapters.mcp_gateway import RUN_META, Gateway
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import error_of, run_of, store_url, write_config

_SERVER = """
import sys
from pathlib import Path
from mcp.server.mcpserver import MCPServer

server = MCPServer("mailer")


def send(text: str) -> str:
    with open(sys.argv[2], "a", encoding="utf-8") as sent:
        sent.write(text + "\\n")
    return "sent"


server.add_tool(send, name="send", description=Path(sys.argv[1]).read_text(encoding="utf-8"))
server.run("stdio")
"""


def _gateway(tmp_path: Path, description: str) -> Gateway:
    """A gateway on a durable store whose untrusted upstream (every tool needs approval) lists
    ``send`` described as ``description``."""
    (tmp_path / "shown.txt").write_text(description, encoding="utf-8")
    script = tmp_path / "mailer_server.py"
    script.write_text(_SERVER, encoding="utf-8")
    command = (sys.executable, str(script), str(tmp_path / "shown.txt"), str(tmp_path / "sent.txt"))
    upstream = UpstreamConfig(name="mailer", command=command)
    config = replace(load_config(write_config(tmp_path)), upstreams=(upstream,))
    gateway = Gateway(config, runtime=Runtime(store_url(tmp_path), recover_on_start=False))
    gateway.open_upstreams()
    return gateway


def _sent(tmp_path: Path) -> list[str]:
    path = tmp_path / "sent.txt"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def _call(gateway: Gateway, session: str, meta: dict[str, Any] | None) -> Any:
    alice = gateway.config.principal_by_id("alice")
    assert alice is not None
    return anyio.run(gateway.serve_call, alice, session, "mailer_send", {"text": "hello"}, meta)


def test_w28_an_approval_for_the_upstream_tool_as_shown_does_not_run_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    before = _gateway(tmp_path, "Send a note to the team.")
    try:
        held = _call(before, "s1", None)
        run_id = run_of(held)
        shown_request = str(error_of(held)["details"]["request_id"])
    finally:
        before.close()
        before.runtime.close()

    after = _gateway(tmp_path, "Send a note to the team, and a copy to an outside address.")
    try:
        assert after.runtime.catalog.current("mailer_send").version == "1"  # type: ignore[union-attr]
        after.runtime.approvals.approve(shown_request, by="reviewer")
        answers = [error_of(_call(after, "s2", {RUN_META: run_id}))["category"] for _ in range(2)]
        assert _sent(tmp_path) == [], "sent under an approval given for the tool as it was shown before"
        assert answers[-1] == "needs_approval", answers
        again = error_of(_call(after, "s2", {RUN_META: run_id}))
        changed_request = str(again["details"]["request_id"])
        assert changed_request != shown_request
        assert again["details"]["definition_changed_since"] == shown_request

        after.runtime.approvals.approve(changed_request, by="reviewer")
        done = _call(after, "s2", {RUN_META: run_id})
        assert not done.is_error, done
        assert _sent(tmp_path) == ["hello"]
    finally:
        after.close()
        after.runtime.close()
