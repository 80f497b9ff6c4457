"""HTTP errors raised by a tool through urllib, httpx or requests map to one taxonomy."""

from __future__ import annotations

import email.message
import io
import urllib.error
from typing import Any

import httpx
import pytest
import requests

from actionspace import Runtime
from actionspace.execution.errors import map_exception, map_http_error, retry_after_seconds


def _urllib(status: int, headers: dict[str, str] | None = None) -> BaseException:
    msg = email.message.Message()
    for k, v in (headers or {}).items():
        msg[k] = v
    return urllib.error.HTTPError("https://api.example/x", status, "reason", msg, io.BytesIO(b""))


def _httpx(status: int, headers: dict[str, str] | None = None) -> BaseException:
    request = httpx.Request("POST", "https://api.example/x")
    response = httpx.Response(status, headers=headers or {}, request=request)
    return httpx.HTTPStatusError("status", request=request, response=response)


def _requests(status: int, headers: dict[str, str] | None = None) -> BaseException:
    response = requests.Response()
    response.status_code = status
    response.headers.update(headers or {})
    return requests.HTTPError(f"{status} error", response=response)


CLIENTS = [_urllib, _httpx, _requests]


@pytest.mark.parametrize("make", CLIENTS)
@pytest.mark.parametrize(
    ("status", "read", "write"),
    [
        (408, "transient", "transient"),
        (502, "transient", "transient"),
        (503, "transient", "transient"),
        (504, "transient", "unknown_commit"),
        (401, "permission_denied", "permission_denied"),
        (403, "permission_denied", "permission_denied"),
        (404, "permanent", "permanent"),
        (409, "conflict", "conflict"),
        (500, "unclassified", "unclassified"),
    ],
)
def test_every_client_maps_a_status_to_one_category(make: Any, status: int, read: str, write: str) -> None:
    assert map_exception(make(status), side_effects=False).category == read
    error = map_exception(make(status), side_effects=True)
    assert error.category == write
    assert error.vendor_code == f"http_{status}"
    assert error.details["status"] == status


@pytest.mark.parametrize("make", CLIENTS)
def test_429_is_rate_limited_with_retry_after_from_the_header(make: Any) -> None:
    error = map_exception(make(429, {"Retry-After": "7"}), side_effects=True)
    assert (error.category, error.retryable, error.retry_after) == ("rate_limited", True, 7.0)


def test_retry_after_reads_an_http_date_too() -> None:
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("soon") is None


def test_a_404_on_a_bound_resource_is_a_stale_reference() -> None:
    error = map_http_error(_httpx(404), side_effects=False, bound=True)
    assert error is not None and error.category == "stale_reference"


def test_transport_failures_keep_the_unknown_commit_rule_for_writes() -> None:
    request = httpx.Request("POST", "https://api.example/x")
    read_timeout = httpx.ReadTimeout("slow", request=request)
    connect_timeout = httpx.ConnectTimeout("no route", request=request)
    assert map_exception(read_timeout, side_effects=True).category == "unknown_commit"
    assert map_exception(read_timeout, side_effects=False).category == "transient"
    assert map_exception(connect_timeout, side_effects=True).category == "transient"
    assert map_exception(requests.ReadTimeout("slow"), side_effects=True).category == "unknown_commit"
    assert map_exception(requests.ConnectTimeout("no route"), side_effects=True).category == "transient"
    url_timeout = urllib.error.URLError(TimeoutError("timed out"))
    assert map_exception(url_timeout, side_effects=True).category == "unknown_commit"
    refused = urllib.error.URLError(ConnectionRefusedError("refused"))
    assert map_exception(refused, side_effects=True).category == "transient"


def test_a_tool_raising_http_429_is_retried_after_the_header_then_answers() -> None:
    rt = Runtime()
    attempts: list[int] = []

    @rt.tool(effect="read")
    def quote(symbol: str) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise _requests(429, {"Retry-After": "0"})
        return {"symbol": symbol, "price": 3}

    obs = rt.call({"name": "quote", "arguments": {"symbol": "X"}})
    assert obs.status == "ok" and len(attempts) == 2


def test_a_write_failing_with_503_is_transient_not_unclassified() -> None:
    rt = Runtime()

    @rt.tool(effect="write")
    def send(text: str) -> None:
        raise _httpx(503)

    obs = rt.call({"name": "send", "arguments": {"text": "hi"}})
    assert obs.error is not None and obs.error.category == "transient"


def test_a_404_for_a_resource_bound_by_entity_binding_is_a_stale_reference() -> None:
    rt = Runtime()
    documents = {"Q3 report": "doc-7"}

    def find_document(ctx: Any, value: Any) -> list[dict[str, str]]:
        return [{"id": documents[value], "label": value}] if value in documents else []

    @rt.tool(effect="read", bindings={"document": find_document})
    def read_document(document: str) -> str:
        raise _httpx(404)  # deleted after it was bound

    @rt.tool(effect="read")
    def fetch_url(url: str) -> str:
        raise _httpx(404)

    stale = rt.call({"name": "read_document", "arguments": {"document": "Q3 report"}})
    assert stale.error is not None and stale.error.category == "stale_reference"
    assert stale.error.details["bound"] == {"document": "doc-7"}
    assert stale.error.resource_ids == ("doc-7",)
    plain = rt.call({"name": "fetch_url", "arguments": {"url": "https://example.org/x"}})
    assert plain.error is not None and plain.error.category == "permanent"
