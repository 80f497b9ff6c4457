"""What the service refuses before any route, token check or parser sees a request.

:class:`BodyLimits` is an ASGI middleware in front of the whole application:

* a body larger than ``max_body_bytes`` is answered 413 as soon as that is known — from
  ``Content-Length`` before a byte of the body is read, or while streaming once the count passes
  the limit — so an unauthenticated client cannot make the server read 150 MB to get its 401;
* a JSON body holding a non-finite number (``NaN``, ``Infinity``, ``-Infinity``, which Python's
  parser accepts but JSON does not) or nested deeper than ``max_json_depth`` is answered 400 with
  the category ``invalid_arguments``, so such a value never reaches a run, a store or a listing.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_JSON_DEPTH", "BodyLimits"]

DEFAULT_MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""Largest request body accepted by default (16 MiB)."""
DEFAULT_MAX_JSON_DEPTH: Final = 256
"""Deepest nesting of a JSON body accepted by default."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})


class _Refused(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"the body holds {name}, which is not a JSON number; send a finite number")


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


def json_problem(body: bytes, *, max_depth: int = DEFAULT_MAX_JSON_DEPTH) -> str | None:
    """Why a JSON body is refused at the edge, or None (malformed JSON is left to the route)."""
    deep = f"the body nests deeper than {max_depth} levels"
    if b"NaN" not in body and b"Infinity" not in body and body.count(b"[") + body.count(b"{") <= max_depth:
        return None  # no constant to refuse, too few brackets to nest that deep: nothing to parse
    try:
        value = json.loads(body, parse_constant=_refuse_constant)
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
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_json_depth = max_json_depth

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
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > self.max_body_bytes:
                await _answer(send, 413, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and _may_be_read_as_json(types):
            problem = json_problem(body, max_depth=self.max_json_depth)
            if problem is not None:
                await _answer(send, 400, problem, category="invalid_arguments")
                return
        await self.app(scope, _replay(body, receive), send)

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
    error: dict[str, Any] = {"message": message}
    if category is not None:
        error["category"] = category
    payload = json.dumps({"error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if status == 413:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
