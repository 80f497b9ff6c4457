"""Redirects answered to the MCP client's HTTP requests: which one a request follows, and why no
redirect's body is ever read.

The SDK follows a redirect within the endpoint's origin (up to the HTTP client's ``max_redirects``)
and reads the redirect's own body whole first, however large, inflated or stalled; and it takes the
JSON body of a 3xx it cannot follow (no Location, a Location that is no URL, a status that is no
redirect) as the request's answer. Here, through the transport's response hook:

* a 3xx answer's body is never read (closing it drops its connection);
* a request follows at most :data:`MAX_REDIRECTS` redirects, each kept within the endpoint's origin
  (or its https upgrade) with its method (:func:`within_origin`);
* any other 3xx answer raises :class:`RedirectRefused`, which the transport turns into the
  ``REDIRECT_REFUSED`` error of that request. A redirect to another origin is never followed: httpx2
  drops only ``Authorization`` on the way, and a token in any other configured header would go along.

A 3xx answer is given instead of processing the request, so a refused redirect is ``permanent`` for
a write too: nothing can have committed (``_mcp_errors``).

The requests this client sends itself (a GET stream, the closing DELETE) follow redirects through
:func:`streamed_within_origin` and :func:`events_within_origin`, built here on httpx2's public API
alone: the SDK's own helpers live in a private module (``mcp.shared._httpx_utils``) that a release may
drop or change, and the transport keeps its guarantees without it. So is the request a refused or
followed redirect asks for (:func:`_following`): a response hook runs before httpx2 sets the response's
``next_request``, and httpx2's own builder of it is private.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any, Final

import httpx2

__all__ = [
    "MAX_REDIRECTS",
    "RedirectRefused",
    "counting_redirects",
    "events_within_origin",
    "redirected",
    "streamed_within_origin",
    "unfollowed",
    "within_origin",
]

MAX_REDIRECTS: Final = 5
"""Most redirects one request follows (each within the endpoint's origin): a loop ends after them."""
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_EVENT_HEADERS: Final = {"accept": "text/event-stream", "cache-control": "no-store"}
"""What a GET for an event stream asks for, under the transport's own headers."""
_HOPS: ContextVar[list[int] | None] = ContextVar("_HOPS", default=None)
"""The statuses of the redirects the request posted in this task followed; None outside such a POST."""


class RedirectRefused(Exception):
    """A 3xx answer to a request that is not followed: raised by the response hook, ends the request."""


class _Unread(httpx2.AsyncByteStream):
    """A redirect's body: never read (it holds no answer); closing it drops its connection."""

    def __init__(self, raw: httpx2.AsyncByteStream) -> None:
        self._raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        nothing: tuple[bytes, ...] = ()
        for piece in nothing:
            yield piece

    async def aclose(self) -> None:
        await self._raw.aclose()


@contextmanager
def counting_redirects() -> Iterator[None]:
    """Within: this task posts one request, whose every redirect :func:`redirected` checks."""
    token = _HOPS.set([])
    try:
        yield
    finally:
        _HOPS.reset(token)


def redirected(client: httpx2.AsyncClient, response: httpx2.Response) -> None:
    """A response hook's part for a 3xx ``response``: its body is made empty and never read; within
    :func:`counting_redirects`, one not to be followed raises :class:`RedirectRefused` (at most
    ``client.max_redirects`` and :data:`MAX_REDIRECTS` are followed). Elsewhere (a GET stream, the
    closing DELETE) the SDK follows within the origin, up to ``max_redirects``, or stops."""
    if isinstance(response.stream, httpx2.AsyncByteStream):
        response.stream = _Unread(response.stream)
    response.headers.pop("content-encoding", None)
    hops = _HOPS.get()
    if hops is None:
        return
    refused, most = _refusal(response), min(client.max_redirects, MAX_REDIRECTS)
    if refused is None and len(hops) >= most:
        refused = f"it is redirect {len(hops) + 1} in a row (at most {most} are followed)"
    if refused is not None:
        raise RedirectRefused(f"the server answered {response.status_code}, not followed: {refused}")
    hops.append(response.status_code)


def _refusal(response: httpx2.Response) -> str | None:
    """Why the 3xx ``response`` is not followed, or None when it is (:func:`_following`)."""
    status, method = response.status_code, response.request.method
    if status not in _REDIRECTS or "location" not in response.headers:
        return f"status {status} is not a redirect to follow"
    try:
        following = _following(response)
        target = str(following.url.copy_with(userinfo=b"", query=None, fragment=None))[:200]
    except (httpx2.InvalidURL, ValueError) as exc:
        return f"its Location is not a URL ({str(exc)[:100]})"
    if following.url.scheme not in ("http", "https"):
        return f"it redirects to a {following.url.scheme[:20]!r} URL"
    if following.method != method:
        return f"status {status} would turn the {method} into a {following.method}"
    if not within_origin(response.request, following):
        return f"it redirects to another origin ({target}); use that URL to follow it"
    return None


def _following(response: httpx2.Response) -> httpx2.Request:
    """The request the redirect ``response`` asks for (its method and URL only), as httpx2 builds the
    ``next_request`` of a response it does not follow, here from public API alone: a response hook runs
    before httpx2 sets ``next_request``. A 303 turns any method but HEAD into a GET, a 302 any but HEAD
    and QUERY, a 301 a POST; a relative Location is joined to the sent URL, one with a scheme and no host
    takes the sent host, and the sent URL's fragment is kept when the Location has none.

    Raises ``httpx2.InvalidURL`` (or ``ValueError``) for a Location that is no URL."""
    sent, status = response.request, response.status_code
    was = sent.method
    turned = {303: was != "HEAD", 302: was not in ("HEAD", "QUERY"), 301: was == "POST"}
    method = "GET" if turned.get(status, False) else was
    url = httpx2.URL(response.headers["location"])
    if url.scheme and not url.host:
        url = url.copy_with(host=sent.url.host)
    if url.is_relative_url:
        url = sent.url.join(url)
    if sent.url.fragment and not url.fragment:
        url = url.copy_with(fragment=sent.url.fragment)
    return httpx2.Request(method, url)


def within_origin(sent: httpx2.Request, following: httpx2.Request) -> bool:
    """Whether ``following``, the request a redirect answered to ``sent`` asks for, may be sent: the same
    method, no credentials of its own in the URL, and the same scheme, host and port as ``sent`` (httpx2
    lower-cases the host and leaves a scheme's default port out), or the https form of an http URL on the
    default ports. Anything else could carry the configured headers, or the body, to another server."""
    if following.method != sent.method:
        return False
    was, goes = sent.url, following.url
    if goes.userinfo and goes.userinfo != was.userinfo:
        return False
    if (goes.scheme, goes.host, goes.port) == (was.scheme, was.host, was.port):
        return True
    upgraded = was.scheme == "http" and goes.scheme == "https"
    return upgraded and goes.host == was.host and was.port is None and goes.port is None


@asynccontextmanager
async def streamed_within_origin(
    client: httpx2.AsyncClient, method: str, url: str, **kwargs: Any
) -> AsyncIterator[httpx2.Response]:
    """The streamed response to ``method url``, following a redirect only while :func:`within_origin`
    takes it, at most ``client.max_redirects`` (and :data:`MAX_REDIRECTS`) times; any other 3xx answer is
    the response (:func:`unfollowed` names it). A followed redirect's body is never read."""
    request = client.build_request(method, url, **kwargs)
    hops = min(client.max_redirects, MAX_REDIRECTS)
    while True:
        response = await client.send(request, stream=True, follow_redirects=False)
        following = response.next_request
        if following is None or hops <= 0 or not within_origin(response.request, following):
            break
        await response.aclose()  # closing an unread body drops its connection
        request, hops = following, hops - 1
    try:
        yield response
    finally:
        await response.aclose()


@asynccontextmanager
async def events_within_origin(
    client: httpx2.AsyncClient, url: str, *, headers: Mapping[str, str], max_event_size: int | None
) -> AsyncIterator[httpx2.EventSource]:
    """A GET for an event stream at ``url`` (``headers`` over the ones asking for it), redirects followed
    as in :func:`streamed_within_origin`; no event over ``max_event_size`` bytes is taken."""
    asked = httpx2.Headers(_EVENT_HEADERS)
    asked.update(headers)
    async with streamed_within_origin(client, "GET", url, headers=asked) as response:
        yield httpx2.EventSource(response, max_event_size=max_event_size)


def unfollowed(response: httpx2.Response) -> str | None:
    """What a 3xx ``response`` left unfollowed by :func:`streamed_within_origin` says, or None."""
    if not 300 <= response.status_code < 400:
        return None
    return f"the server answered {response.status_code}, a redirect not followed"
