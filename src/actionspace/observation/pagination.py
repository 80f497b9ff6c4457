"""Paged listings: how a tool returns one page, and how a page observation is read back.

A paged tool returns :func:`page`; the observation then carries

* ``data = {"items": [...]}``: this page's items (trimmed like any data when too large; the full
  page is in the artifact store then);
* ``cursor``: where the next page starts, None on the last page;
* ``total``: how many items the whole listing holds, when the tool knows it;
* ``complete``: False while another page follows (also when anything was cut or served stale);
* ``diagnostics["sort_key"]``: the order the pages follow, and ``diagnostics["after"]``: the
  cursor this page was asked for (absent on the first page), so a verifier can check that a set
  of pages is one unbroken walk from the first page to the last.

Cursors are opaque strings; :func:`encode_cursor` / :func:`decode_cursor` make keyset cursors
(URL-safe base64 of canonical JSON) sealed by an HMAC-SHA256 over the position and what the cursor
is bound to: the ``query`` the tool passes (the arguments that select the listing, such as
``{"region": "eu"}``) and, inside a :func:`cursor_scope`, the run and the tool, under the scope's
:class:`CursorKey` (else a key made once per process). A cursor comes back from the model, so
``decode_cursor`` raises ``ToolError("invalid_arguments")`` for one that is malformed, written or
edited by hand, or minted for another query, tool, run or key: it is refused, never followed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from actionspace._canonical import canonical_bytes
from actionspace.errors import ToolError
from actionspace.execution.result import ToolResult
from actionspace.observation._artifacts import ArtifactStore
from actionspace.types import Observation

__all__ = [
    "ITEMS_KEY",
    "CursorKey",
    "PageInfo",
    "cursor_scope",
    "decode_cursor",
    "encode_cursor",
    "page",
    "page_info",
    "page_items",
]

ITEMS_KEY = "items"
"""The key of a page's items in ``data``."""


def page(
    items: Iterable[Any],
    *,
    cursor: str | None = None,
    total: int | None = None,
    sort_key: str | None = None,
    after: str | None = None,
) -> ToolResult:
    """One page of a listing, as a tool returns it.

    ``cursor``: where the next page starts (None on the last page). ``total``: the size of the
    whole listing, when known. ``sort_key``: the order pages follow. ``after``: the cursor this
    page was asked for (None for the first page). The observation is ``complete`` only when no
    page follows.
    """
    return ToolResult(
        data={ITEMS_KEY: list(items)},
        complete=cursor is None,
        cursor=cursor,
        total=total,
        sort_key=sort_key,
        after=after,
    )


class CursorKey:
    """The secret that seals cursors (32 random bytes unless ``secret`` is given: give the same
    one to every process that must read another's cursors)."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secrets.token_bytes(32) if secret is None else bytes(secret)

    def tag(self, material: bytes) -> str:
        return hmac.new(self._secret, material, hashlib.sha256).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class _Scope:
    key: CursorKey
    run_id: str
    tool: str


_PROCESS = _Scope(CursorKey(), "", "")
_SCOPE: ContextVar[_Scope] = ContextVar("actionspace_cursor_scope", default=_PROCESS)
MAX_CURSOR_CHARS = 8192
"""A longer cursor is refused unread."""


@contextmanager
def cursor_scope(key: CursorKey, *, run_id: str, tool: str) -> Iterator[None]:
    """Cursors minted and read inside are bound to ``run_id`` and ``tool`` under ``key`` (a
    runtime enters one around a paged tool's call; threads started inside copy it)."""
    token = _SCOPE.set(_Scope(key, run_id, tool))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _seal(position: Any, query: Mapping[str, Any] | None) -> str:
    scope = _SCOPE.get()
    material = canonical_bytes([scope.run_id, scope.tool, dict(query or {}), position])
    return scope.key.tag(material)


def encode_cursor(position: Mapping[str, Any], *, query: Mapping[str, Any] | None = None) -> str:
    """An opaque cursor for a keyset position such as ``{"id": 250}``, bound to ``query`` (the
    arguments that select the listing) and to the current :func:`cursor_scope`."""
    body = {"p": dict(position), "s": _seal(dict(position), query)}
    return base64.urlsafe_b64encode(canonical_bytes(body)).decode("ascii").rstrip("=")


_MALFORMED = "the cursor is malformed; start again without one"
_FOREIGN = (
    "the cursor was not issued for this listing (another query, tool or run, or edited); "
    "start again without one"
)


def decode_cursor(cursor: str, *, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The position inside ``cursor``, minted by :func:`encode_cursor` for the same ``query`` in
    the same scope; ``ToolError("invalid_arguments")`` for any other string."""
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS:
        raise ToolError("invalid_arguments", _MALFORMED)
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        body = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, RecursionError) as exc:
        raise ToolError("invalid_arguments", _MALFORMED) from exc
    if not isinstance(body, dict) or set(body) != {"p", "s"}:
        raise ToolError("invalid_arguments", _MALFORMED)
    position, tag = body["p"], body["s"]
    if not isinstance(position, dict) or not isinstance(tag, str):
        raise ToolError("invalid_arguments", _MALFORMED)
    try:
        expected = _seal(position, query)
    except (ValueError, TypeError, RecursionError) as exc:
        raise ToolError("invalid_arguments", _MALFORMED) from exc
    if not hmac.compare_digest(expected, tag):
        raise ToolError("invalid_arguments", _FOREIGN)
    return position


@dataclass(frozen=True, slots=True, kw_only=True)
class PageInfo:
    """What an observation says about its place in a paged listing."""

    cursor: str | None
    """Where the next page starts; None when nothing follows."""
    after: str | None
    """The cursor the page was asked for; None for a first page (or an unpaged result)."""
    total: int | None
    sort_key: str | None

    @property
    def last(self) -> bool:
        return self.cursor is None


def page_info(obs: Observation) -> PageInfo:
    """The paging facts of ``obs`` (see the module docstring for where each one lives)."""
    diagnostics = obs.diagnostics
    after = diagnostics.get("after")
    sort_key = diagnostics.get("sort_key")
    return PageInfo(
        cursor=obs.cursor,
        after=after if isinstance(after, str) else None,
        total=obs.total,
        sort_key=sort_key if isinstance(sort_key, str) else None,
    )


def page_items(obs: Observation, artifacts: ArtifactStore | None = None) -> Sequence[Any] | None:
    """Every item of a page observation, or None when they cannot be read in full.

    When ``data`` was trimmed the items come from the full output in ``artifacts``; without the
    artifact the answer is None (the visible items are not all of them). ``data`` may be the
    ``{"items": [...]}`` of :func:`page` or a bare list.
    """
    data: Any = obs.data
    if obs.trimming is not None:
        if artifacts is None or obs.artifact_ref is None:
            return None
        try:
            data = json.loads(artifacts.get(obs.artifact_ref))
        except (KeyError, ValueError):
            return None
    if isinstance(data, Mapping):
        data = data.get(ITEMS_KEY)
    return data if isinstance(data, list) else None
