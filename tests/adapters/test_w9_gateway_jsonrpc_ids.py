"""The HTTP gateway and JSON-RPC ids: MCP requests carry a string or an integer id, never null.

The MCP specification (basic/messages): "Requests MUST include a string or integer ID. Unlike
base JSON-RPC, the ID MUST NOT be null", and notifications carry no id at all. A message with a
method and some other id is neither; taken as a notification it would be answered 202 and never
again, leaving its client waiting for an answer that does not come.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.adapters.gateway_support import ALICE_TOKEN, http_gateway, write_config

_JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def session(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[httpx.Client, str, dict[str, str], Path]]:
    """An initialized session of alice on a real HTTP gateway: client, URL, headers, desk database."""
    folder = tmp_path_factory.mktemp("gateway-w9-ids")
    with http_gateway(write_config(folder)) as url, httpx.Client(timeout=30) as client:
        auth = {**_JSON, "Authorization": f"Bearer {ALICE_TOKEN}"}
        opened = client.post(url, json=_INIT, headers=auth)
        assert opened.status_code == 200, opened.text
        headers = {**auth, "mcp-session-id": opened.headers["mcp-session-id"]}
        done = client.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        assert done.status_code == 202
        yield client, url, headers, folder / "desk.db"


def _tickets(desk: Path, title: str) -> int:
    with sqlite3.connect(desk) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'tickets'").fetchone() is None:
            return 0  # the desk makes its tables at its first write
        return int(conn.execute("SELECT count(*) FROM tickets WHERE title = ?", (title,)).fetchone()[0])


def _answer_of(response: httpx.Response) -> dict[str, object]:
    """The one JSON-RPC message of an answer (plain JSON or one server-sent event)."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        assert len(data) == 1, response.text
        return dict(json.loads(data[0]))
    return dict(json.loads(response.text))


@pytest.mark.parametrize("bad_id", ["null", "1.5", "3.0", "1e2", "true", "{}", "[1]", "NaN"])
def test_a_call_whose_id_is_neither_a_string_nor_an_integer_is_an_invalid_request_and_runs_nothing(
    session: tuple[httpx.Client, str, dict[str, str], Path], bad_id: str
) -> None:
    client, url, headers, desk = session
    title = f"id {bad_id}"
    call = {"name": "create_ticket", "arguments": {"customer_id": "c1", "title": title}}
    body = f'{{"jsonrpc": "2.0", "id": {bad_id}, "method": "tools/call", "params": {json.dumps(call)}}}'
    answer = client.post(url, content=body.encode(), headers=headers)
    assert answer.status_code == 400, answer.text
    message = _answer_of(answer)
    assert message["id"] is None and message["jsonrpc"] == "2.0"
    error = message["error"]
    assert isinstance(error, dict) and error["code"] == -32600
    assert "string or an integer" in error["message"]
    assert _tickets(desk, title) == 0
    still = client.post(url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, headers=headers)
    assert still.status_code == 200 and _answer_of(still)["id"] == 9  # the session goes on


@pytest.mark.parametrize("good_id", ['"x"', '""', "0", "-7", "123456789012345678901234567890"])
def test_a_string_or_integer_id_is_answered_under_that_id(
    session: tuple[httpx.Client, str, dict[str, str], Path], good_id: str
) -> None:
    client, url, headers, _desk = session
    body = f'{{"jsonrpc": "2.0", "id": {good_id}, "method": "tools/list"}}'
    answer = client.post(url, content=body.encode(), headers=headers)
    assert answer.status_code == 200, answer.text
    assert _answer_of(answer)["id"] == json.loads(good_id)


def test_an_id_inside_the_arguments_is_not_the_messages_id(
    session: tuple[httpx.Client, str, dict[str, str], Path],
) -> None:
    client, url, headers, _desk = session
    params = {"name": "lookup_customer", "arguments": {"customer_id": "c1", "id": None}}
    answer = client.post(
        url, json={"jsonrpc": "2.0", "id": "q", "method": "tools/call", "params": params}, headers=headers
    )
    assert answer.status_code == 200 and _answer_of(answer)["id"] == "q", answer.text


def test_a_notification_without_an_id_is_still_accepted(
    session: tuple[httpx.Client, str, dict[str, str], Path],
) -> None:
    client, url, headers, _desk = session
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 12345}}
    assert client.post(url, json=note, headers=headers).status_code == 202


@pytest.mark.parametrize(
    ("label", "body"),
    [
        ("id", '{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "id": 7}'),
        (
            "title",
            '{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "create_ticket",'
            ' "arguments": {"customer_id": "c1", "title": "dup shown", "title": "dup sent"}}}',
        ),
    ],
)
def test_a_message_naming_a_member_twice_is_an_invalid_request_and_runs_nothing(
    session: tuple[httpx.Client, str, dict[str, str], Path], label: str, body: str
) -> None:
    """Which of the two values counts depends on who reads the message: none does."""
    client, url, headers, desk = session
    answer = client.post(url, content=body.encode(), headers=headers)
    assert answer.status_code == 400, answer.text
    error = _answer_of(answer)["error"]
    assert isinstance(error, dict) and error["code"] == -32600 and f"'{label}'" in error["message"]
    assert _tickets(desk, "dup shown") == 0 and _tickets(desk, "dup sent") == 0
