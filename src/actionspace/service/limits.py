"""What the service refuses before any route or parser sees a request, and when it authenticates.

:class:`BodyLimits` is an ASGI middleware in front of the whole application:

* a body larger than ``max_body_bytes`` is answered 413 as soon as that is known — from
  ``Content-Length`` before a byte of the body is read, or while streaming once the count passes
  the limit — so no client can make the server read 150 MB;
* then, before a byte of the body is read, ``before_read`` may answer the request itself: the
  application authenticates there (:class:`actionspace.service.auth.BeforeBody`), so a client
  without a good token gets its 401 without the body being read or parsed, and the checks below
  are spent on authenticated requests only;
* a JSON body in another encoding than UTF-8 (UTF-16 or UTF-32, which the route's parser would
  read too, past the checks below), or holding a non-finite number (``NaN``, ``Infinity``,
  ``-Infinity``, which Python's parser accepts but JSON does not, or a literal such as ``1e999``
  too large for a float, which it reads as infinity), nested deeper than ``max_json_depth``, or
  naming one member twice in an object (Python keeps the last value, other readers such as a
  proxy's filter the first, so no value is sure to be the one meant) is answered 400 with the
  category ``invalid_arguments``, so such a value never reaches a run, a store or a listing; a body
  over :data:`CHECKED_INLINE_BYTES` is checked in a worker thread (megabytes of small objects take
  seconds to read), so the event loop goes on serving the other connections meanwhile;
* a body still arriving ``body_timeout_s`` after the application started reading it is answered
  408 and the connection closed, so a client trickling a byte at a time (a slow-body "slowloris")
  cannot hold a connection and a reader for as long as it likes.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final, Literal

import anyio

__all__ = [
    "CHECKED_INLINE_BYTES",
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "STATUS_CATEGORIES",
    "BodyLimits",
    "category_of",
]

DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Largest request body accepted by default (16 MiB)."""
DEFAULT_MAX_JSON_DEPTH: Final = 256
"""Deepest nesting of a JSON body accepted by default."""
DEFAULT_BODY_TIMEOUT_S: Final = 60.0
"""Seconds a request body may take to arrive, whole, by default (16 MiB at about 2 Mbit/s)."""
CHECKED_INLINE_BYTES: Final = 64 * 1024
"""Largest JSON body checked on the event loop; a larger one is checked in a worker thread."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
BeforeRead = Callable[[Scope, Send], Awaitable[bool]]
"""Called with a request that carries a body before it is read; True when it answered the request."""

_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})

STATUS_CATEGORIES: Final[dict[int, str]] = {
    400: "invalid_arguments",
    401: "permission_denied",
    403: "permission_denied",
    404: "invalid_arguments",
    405: "invalid_arguments",
    408: "transient",
    409: "conflict",
    413: "invalid_arguments",
    415: "invalid_arguments",
    422: "invalid_arguments",
    429: "rate_limited",
    500: "internal",
    503: "transient",
}
"""The error category an answer of this status names when nothing more precise was given: a client
can act on every refusal by its category alone, whichever layer refused the request."""


def category_of(status: int) -> str:
    """The category of an error answered with ``status`` (:data:`STATUS_CATEGORIES`)."""
    if status in STATUS_CATEGORIES:
        return STATUS_CATEGORIES[status]
    return "internal" if status >= 500 else "invalid_arguments"


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"the body holds {name}, which is not a JSON number; send a finite number")


_MAY_OVERFLOW: Final = re.compile(rb"[0-9][eE]|[0-9]{300}")
"""A float literal read as infinity has an exponent or more than 300 digits."""


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(f"the body holds {text[:40]!r}, a number too large for a float; send a smaller one")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """True when containers in ``value`` nest deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members, refused when one name comes twice (whose value counts is up to the reader)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _Refused(f"the body names {name[:40]!r} twice in one object; send each member once")
            seen.add(name)
    return value


def json_problem(body: bytes, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> str | None:
    """Why a JSON body is refused at the edge, or None (malformed JSON is left to the route)."""
    deep = f"the body nests deeper than {max_depth} levels"
    encoding = json.detect_encoding(body)
    if encoding not in ("utf-8", "utf-8-sig"):
        # the route's parser reads UTF-16 and UTF-32 too, where the byte checks below find nothing
        return f"the body is JSON in {encoding.upper()}; send it in UTF-8 (RFC 8259)"
    if (
        b"NaN" not in body
        and b"Infinity" not in body
        and body.count(b"[") + body.count(b"{") <= max_depth
        and _MAY_OVERFLOW.search(body) is None
        and body.count(b":") < 2
    ):
        return None  # nothing to refuse, and too few members to name one twice: nothing to parse
    try:
        value = json.loads(
            body, parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_once_each
        )
    except _Refused as exc:
        return exc.message
    except RecursionError:
        return deep
    except ValueError:
        return None
    return deep if _deeper_than(value, max_depth) else None


class BodyLimits:
    """The ASGI middleware (see the module docstring)."""

    def __init__(
        self,
        app: App,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
        body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
        before_read: BeforeRead | None = None,
    ) -> None:
        self.app = app
        self.before_read = before_read
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method", "GET") in _NO_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        types = [v.lower() for k, v in scope.get("headers", ()) if k.lower() == b"content-type"]
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                size = int(declared)
            except ValueError:
                await _answer(send, 400, "Content-Length is not a number")
                return
            if size > self.max_body_bytes:
                await _answer(send, 413, self._too_large())
                return
        if self.before_read is not None and await self.before_read(scope, send):
            return
        body: bytes | Literal["gone", "too_large"] = "gone"
        with anyio.move_on_after(self.body_timeout_s) as reading:  # bounds the read only, never the route
            body = await self._read(receive)
        if reading.cancelled_caught:
            await _answer(send, 408, f"the request body did not arrive within {self.body_timeout_s:g} s")
            return
        if body == "too_large":
            await _answer(send, 413, self._too_large())
            return
        if body == "gone":
            return
        if body and _may_be_read_as_json(types):
            check = functools.partial(json_problem, body, max_depth=self.max_json_depth)
            problem = check() if len(body) <= CHECKED_INLINE_BYTES else await anyio.to_thread.run_sync(check)
            if problem is not None:
                await _answer(send, 400, problem, category="invalid_arguments")
                return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes | Literal["gone", "too_large"]:
        """The whole body, else why not: the client left, or the body passed the limit."""
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return "gone"
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_body_bytes:
                return "too_large"
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> str:
        return f"the request body exceeds {self.max_body_bytes} bytes"


def _may_be_read_as_json(content_types: list[bytes]) -> bool:
    """Whether a route may parse the body as JSON: without a content type it does, and a media type
    is case-insensitive; with several headers, whichever one a route or a proxy reads counts."""
    return not content_types or any(not t.strip() or b"json" in t for t in content_types)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _answer(send: Send, status: int, message: str, *, category: str | None = None) -> None:
    error: dict[str, Any] = {"message": message, "category": category or category_of(status)}
    payload = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if status in (408, 413):
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
