"""Which redirect an MCP request follows is decided on httpx2's public API alone:

* with httpx2's private ``AsyncClient._build_redirect_request`` gone for every caller but httpx2 itself
  (as a release that renamed it would leave this client), a redirect within the origin is still
  followed and every other one still ends ``redirect_refused``, in both protocol eras; before, the
  response hook called it and each of those calls failed otherwise;
* the request the hook takes a redirect to ask for is, on every Location, status and method tried, the
  ``next_request`` httpx2 itself sets on a response it does not follow (public), or a Location httpx2
  finds no URL in either;
* the hook follows no more redirects in a row than the HTTP client's own ``max_redirects``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters import _mcp_redirects
from actionspace.adapters._mcp_redirects import RedirectRefused, counting_redirects, redirected
from tests.adapters.test_w75_mcp_http_redirects import ERAS, call, requests_of, served, start_program

_PRIVATE = "_build_redirect_request"


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    path = tmp_path / "notes.txt"
    path.touch()
    return path


@pytest.fixture
def endpoint(notes: Path, era: str) -> Iterator[str]:
    proc, url = start_program(notes, era)
    try:
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)


@pytest.fixture
def without_private_builder(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """httpx2's private redirect builder, refused to any caller outside httpx2; the callers refused."""
    own = httpx2.AsyncClient._build_redirect_request
    refused: list[str] = []

    def builder(self: httpx2.AsyncClient, request: httpx2.Request, response: httpx2.Response) -> Any:
        frame = inspect.currentframe()
        caller = frame.f_back.f_globals.get("__name__", "") if frame and frame.f_back else ""
        if not str(caller).startswith("httpx2"):
            refused.append(str(caller))
            raise AttributeError(f"'AsyncClient' object has no attribute {_PRIVATE!r}")
        return own(self, request, response)

    monkeypatch.setattr(httpx2.AsyncClient, _PRIVATE, builder)
    return refused


def test_redirects_are_followed_or_refused_without_httpx2s_private_builder(
    endpoint: str, notes: Path, without_private_builder: list[str]
) -> None:
    rt: Runtime = served(endpoint, timeout_s=10.0)
    try:
        outcomes = {}
        for tool in ("moved_write", "cross_origin_write", "see_other_write", "loop_write", "moved"):
            _, obs = call(rt, tool)
            outcomes[tool] = (
                obs.data if obs.error is None else (obs.error.category, obs.error.details.get("error"))
            )
    finally:
        rt.close()
    refused = ("permanent", "redirect_refused")
    assert outcomes == {
        "moved_write": "moved fine",
        "cross_origin_write": refused,
        "see_other_write": refused,
        "loop_write": refused,
        "moved": "moved fine",
    }, (outcomes, without_private_builder)
    assert without_private_builder == []  # nothing outside httpx2 asked for it
    assert not [line for line in requests_of(notes, "cross_origin_write") if " localhost:" in line]


_SENT = st.builds(
    "{}://{}example.com{}/mcp{}".format,
    st.sampled_from(["http", "https"]),
    st.sampled_from(["", "user:pw@"]),
    st.sampled_from(["", ":8080"]),
    st.sampled_from(["", "?q=1", "#part"]),
)
_LOCATIONS = st.one_of(
    st.text(st.characters(max_codepoint=255), max_size=40),
    st.sampled_from(
        [
            "/mcp/v2",
            "v2",
            "../up",
            "?x=1",
            "#frag",
            "//example.com:8080/x",
            "//other.example/x",
            "https://example.com/mcp",
            "https:/nohost",
            "http://[::1",
            "ftp://example.com/x",
            "javascript:alert(1)",
            "data:,x",
            "http://other:pw@example.com/mcp",
            "HTTP://EXAMPLE.COM:80/mcp",
        ]
    ),
)


@settings(max_examples=400, deadline=None)
@given(
    sent=_SENT,
    location=_LOCATIONS,
    status=st.sampled_from([301, 302, 303, 307, 308]),
    method=st.sampled_from(["POST", "GET", "HEAD", "PUT", "DELETE", "QUERY"]),
)
def test_the_request_a_redirect_asks_for_is_httpx2s_own_next_request(
    sent: str, location: str, status: int, method: str
) -> None:
    headers = [(b"location", location.encode("latin-1"))]
    transport = httpx2.MockTransport(lambda request: httpx2.Response(status, headers=headers))
    with httpx2.Client(transport=transport, follow_redirects=False) as client:
        response = client.request(method, sent)
    expected = response.next_request  # None: httpx2 found no URL in the Location
    try:
        got = _mcp_redirects._following(response)
    except (httpx2.InvalidURL, ValueError):
        assert expected is None, (expected.method, str(expected.url))
        return
    assert expected is not None, (got.method, str(got.url))
    assert (got.method, str(got.url)) == (expected.method, str(expected.url))


def test_no_more_redirects_follow_in_a_row_than_the_clients_max_redirects() -> None:
    client = httpx2.AsyncClient(max_redirects=2)
    request = client.build_request("POST", "http://127.0.0.1:8000/mcp", json={})
    moved = {"location": "/mcp/moved"}
    with counting_redirects():
        for _ in range(2):
            redirected(client, httpx2.Response(307, headers=moved, request=request))
        with pytest.raises(RedirectRefused, match=r"redirect 3 in a row \(at most 2 are followed\)"):
            redirected(client, httpx2.Response(307, headers=moved, request=request))
