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
(URL-safe base64 of canonical JSON). A cursor comes back from the model, so a tool must treat
the decoded value as untrusted input; ``decode_cursor`` raises ``ToolError("invalid_arguments")``
for a malformed one.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actionspace._canonical import canonical_bytes
from actionspace.errors import ToolError
from actionspace.execution.result import ToolResult
from actionspace.observation._artifacts import ArtifactStore
from actionspace.types import Observation

__all__ = ["ITEMS_KEY", "PageInfo", "decode_cursor", "encode_cursor", "page", "page_info", "page_items"]

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


def encode_cursor(position: Mapping[str, Any]) -> str:
    """An opaque cursor for a keyset position such as ``{"id": 250}``."""
    return base64.urlsafe_b64encode(canonical_bytes(dict(position))).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    """The position inside ``cursor``; ``ToolError("invalid_arguments")`` when it is malformed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        position = json.loads(raw)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ToolError("invalid_arguments", "the cursor is malformed; start again without one") from exc
    if not isinstance(position, dict):
        raise ToolError("invalid_arguments", "the cursor is malformed; start again without one")
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
