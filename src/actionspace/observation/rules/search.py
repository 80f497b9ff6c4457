"""``search-v1``: search results keep, per hit, the path, the line number and bounded context.

Reads ``grep -n`` / ``rg -n`` text (``path:line:text``; ``path-line-text`` context lines from
``-A/-B/-C``; ``--`` separators; ``rg --heading`` groups), or records ``{path, line, text}`` (also
``file``, ``line_number``, ``snippet``, ``context`` …). ``data`` is::

    {"total_hits", "files", "hits": [{"path", "line", "text", "before"?, "after"?, "context"?}],
     "omitted_hits", "omitted_files"?: {"count", "paths"}, "duplicates"?, "unparsed_lines"?}

Duplicate hits (same path and line) are counted once. At most 5 hits per file and 50 in all are
shown, chosen breadth first: the first hit of every file before the second hit of any, so a file
with thousands of matches cannot hide the only match in another. Hits are held for the first 25
and the last 25 files of the output (the others are counted and named in ``omitted_files``).
Hits are listed grouped by file in the order files appeared; context lines read ``<line>-<text>``
as grep writes them.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from actionspace._canonical import clip_end, normalize
from actionspace.observation.rules._base import LineBuffer, Source, TrimRule, fit, small_fields
from actionspace.observation.rules.log import chain_text, is_text

__all__ = ["SearchRule"]

PER_FILE: Final = 5
FILES_KEPT: Final = 50
"""Files whose hits are held: the first half and the most recent half seen."""
CONTEXT_LINES: Final = 2
TEXT_CHARS: Final = 300
FILE_CAP: Final = 4096
"""Distinct paths remembered by name; further files are counted on each change of path."""
SEEN_CAP: Final = 65_536

_HIT: Final = re.compile(r"(?P<path>[^\n]+?):(?P<line>\d+):(?P<text>.*)", re.DOTALL)
_CONTEXT: Final = re.compile(r"(?P<path>[^\n]+?)-(?P<line>\d+)-(?P<text>.*)", re.DOTALL)
_NUMBERED: Final = re.compile(r"(?P<line>\d+)(?P<sep>[:-])(?P<text>.*)", re.DOTALL)
_LIST_KEYS: Final = ("hits", "results", "matches", "items")
_PATH_KEYS: Final = ("path", "file", "filename", "uri", "url", "source")
_LINE_KEYS: Final = ("line", "line_number", "lineno", "line_no", "start_line")
_TEXT_KEYS: Final = ("text", "line_text", "match", "snippet", "preview", "content")

_RUNGS: Final[tuple[tuple[int, int, int, int, int], ...]] = (
    # hits in all, hits per file, chars per line, context lines each side, omitted paths listed
    (50, 5, 300, 2, 20),
    (40, 5, 240, 2, 20),
    (30, 4, 200, 1, 15),
    (25, 3, 160, 1, 10),
    (20, 3, 120, 0, 10),
    (15, 2, 100, 0, 8),
    (10, 2, 80, 0, 5),
    (8, 1, 80, 0, 5),
    (5, 1, 60, 0, 3),
    (3, 1, 60, 0, 2),
    (1, 1, 40, 0, 1),
    (0, 0, 0, 0, 0),
)


class _Hit:
    __slots__ = ("after", "before", "context", "context_total", "length", "line", "path", "text", "title")

    def __init__(self, path: str, line: int | None, text: str, length: int) -> None:
        self.path, self.line, self.text, self.length = path, line, text, length
        self.before: list[tuple[int, str, int]] = []
        self.after: list[tuple[int, str, int]] = []
        self.context: list[tuple[str, int]] | None = None
        self.context_total = 0
        self.title: str | None = None


class SearchRule(TrimRule):
    """``search-v1`` (see the module docstring)."""

    name: ClassVar[str] = "search"
    version: ClassVar[str] = "1"

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(max_bytes=max_bytes, fields=fields)
        self._buffer = LineBuffer(TEXT_CHARS * 4)
        self._kept: dict[str, list[_Hit]] = {}
        self._recent: OrderedDict[str, list[_Hit]] = OrderedDict()
        self._counts: dict[str, int] = {}
        self._untracked = 0
        self._last_untracked: str | None = None
        self._total = self._duplicates = self._unparsed = 0
        self._seen: set[tuple[str, object]] = set()
        self._pending: deque[tuple[str, int, str, int]] = deque(maxlen=CONTEXT_LINES)
        self._last: _Hit | None = None
        self._heading: str | None = None
        self._heading_used = True
        self._cut = False

    @classmethod
    def unwrap(cls, value: object) -> Source | None:
        if is_text(value):
            return Source(text=chain_text([value]) if isinstance(value, list | tuple) else value)
        if isinstance(value, list | tuple) and all(isinstance(v, Mapping | str) for v in value):
            return Source(items=normalize(list(value)))
        if isinstance(value, Mapping):
            for key in _LIST_KEYS:
                items = value.get(key)
                if isinstance(items, list | tuple):
                    return Source(fields=small_fields(value, _LIST_KEYS), items=normalize(list(items)))
            for key in ("output", "stdout"):
                if value.get(key) is not None and is_text(value[key]):
                    skip = ("output", "stdout", "stderr")
                    return Source(fields=small_fields(value, skip), text=chain_text([value[key]]))
        return None

    def feed(self, chunk: str) -> None:
        first, block = self._buffer.feed(chunk)
        if first is not None:
            self._line(first[0])
        if block is not None:
            for line in block.split("\n"):
                self._line(line)

    def feed_item(self, item: Any) -> None:
        if isinstance(item, str):
            self._line(item.rstrip("\n"))
            return
        if not isinstance(item, Mapping):
            self._unparsed += 1
            return
        path = _first(item, _PATH_KEYS, str) or ""
        line = _first(item, _LINE_KEYS, int)
        text = _first(item, _TEXT_KEYS, str) or ""
        hit = self._hit(path, line, text[:TEXT_CHARS], len(text), (path, line if line is not None else text))
        if hit is None:
            return
        context = item.get("context")
        if isinstance(context, str):
            context = context.splitlines()
        if isinstance(context, list):
            hit.context = [(str(c)[:TEXT_CHARS], len(str(c))) for c in context[: 2 * CONTEXT_LINES + 1]]
            hit.context_total = len(context)
        title = item.get("title")
        if isinstance(title, str):
            hit.title = clip_end(title, TEXT_CHARS)

    def finish(self) -> tuple[Any, bool]:
        last = self._buffer.flush()
        if last is not None:
            self._line(last[0])
        if self._heading is not None and not self._heading_used:
            self._unparsed += 1
            self._heading = None
        return fit(_RUNGS, self._build, self.max_bytes, self._minimal), self._cut

    # -- reading -------------------------------------------------------------------------------

    def _line(self, line: str) -> None:
        line = line.rstrip("\r")
        if self._heading is not None:
            numbered = _NUMBERED.fullmatch(line)
            if numbered is not None:
                self._heading_used = True
                self._entry(self._heading, int(numbered["line"]), numbered["text"], numbered["sep"] == ":")
                return
        hit = _HIT.fullmatch(line)
        if hit is not None:
            self._entry(hit["path"], int(hit["line"]), hit["text"], True)
            return
        context = _CONTEXT.fullmatch(line)
        if context is not None:
            self._entry(context["path"], int(context["line"]), context["text"], False)
            return
        if line == "--":
            self._pending.clear()
            return
        if self._heading is not None and not self._heading_used:
            self._unparsed += 1
        if line.strip():
            self._heading, self._heading_used = line, False
        else:
            self._heading = None

    def _entry(self, path: str, number: int, text: str, is_hit: bool) -> None:
        if is_hit:
            hit = self._hit(path, number, text[:TEXT_CHARS], len(text), (path, number))
            if hit is not None:
                hit.before = [
                    (n, t, k) for p, n, t, k in self._pending if p == path and 0 < number - n <= CONTEXT_LINES
                ]
            self._pending.clear()
            return
        last = self._last
        gap = number - last.line if last is not None and last.path == path and last.line is not None else 0
        if last is not None and 0 < gap <= CONTEXT_LINES and len(last.after) < CONTEXT_LINES:
            last.after.append((number, text[:TEXT_CHARS], len(text)))
            return
        self._pending.append((path, number, text[:TEXT_CHARS], len(text)))

    def _hit(self, path: str, line: int | None, text: str, size: int, key: tuple[str, Any]) -> _Hit | None:
        if key in self._seen:
            self._duplicates += 1
            return None
        if len(self._seen) < SEEN_CAP:
            self._seen.add(key)
        self._total += 1
        self._last = None
        if path in self._counts:
            self._counts[path] += 1
        elif len(self._counts) < FILE_CAP:
            self._counts[path] = 1
        else:
            if path != self._last_untracked:
                self._untracked += 1
                self._last_untracked = path
            return None
        kept = self._kept.get(path)
        if kept is None:
            kept = self._recent.get(path)
        if kept is None:
            kept = []
            if len(self._kept) < FILES_KEPT // 2:
                self._kept[path] = kept
            else:
                self._recent[path] = kept
                if len(self._recent) > FILES_KEPT - FILES_KEPT // 2:
                    self._recent.popitem(last=False)
        if len(kept) >= PER_FILE:
            return None
        hit = _Hit(path, line, text, size)
        kept.append(hit)
        self._last = hit
        return hit

    # -- rendering -----------------------------------------------------------------------------

    def _build(self, rung: tuple[int, int, int, int, int]) -> dict[str, Any]:
        total, per_file, chars, context, listed = rung
        files = {**self._kept, **self._recent}
        chosen = _breadth_first(files, total, per_file)
        hits: list[dict[str, Any]] = []
        clipped = False
        for hit in (h for path_hits in files.values() for h in path_hits if id(h) in chosen):
            shown, cut = _show(hit, chars, context)
            hits.append(shown)
            clipped |= cut
        shown_paths = {hit["path"] for hit in hits}
        omitted_paths = [p for p in self._counts if p not in shown_paths]
        omitted_count = len(omitted_paths) + self._untracked
        self._cut = clipped or len(hits) < self._total or self._unparsed > 0
        data: dict[str, Any] = {
            **self.fields,
            "total_hits": self._total,
            "files": len(self._counts) + self._untracked,
            "hits": hits,
            "omitted_hits": self._total - len(hits),
        }
        if omitted_count:
            data["omitted_files"] = {"count": omitted_count, "paths": omitted_paths[:listed]}
        if self._duplicates:
            data["duplicates"] = self._duplicates
        if self._unparsed:
            data["unparsed_lines"] = self._unparsed
        return data

    def _minimal(self) -> dict[str, Any]:
        self._cut = self._total > 0 or self._unparsed > 0
        return {
            "total_hits": self._total,
            "files": len(self._counts) + self._untracked,
            "hits": [],
            "omitted_hits": self._total,
        }


def _breadth_first(kept: dict[str, list[_Hit]], total: int, per_file: int) -> set[int]:
    chosen: set[int] = set()
    for rank in range(per_file):
        for hits in kept.values():
            if len(chosen) >= total:
                return chosen
            if rank < len(hits):
                chosen.add(id(hits[rank]))
    return chosen


def _show(hit: _Hit, chars: int, context: int) -> tuple[dict[str, Any], bool]:
    clipped = hit.length > chars
    out: dict[str, Any] = {"path": hit.path, "line": hit.line, "text": clip_end(hit.text, chars, hit.length)}
    if hit.title is not None:
        out["title"] = clip_end(hit.title, chars)
    before = hit.before[-context:] if context else []
    after = hit.after[:context]
    clipped |= len(before) < len(hit.before) or len(after) < len(hit.after)
    if before:
        out["before"] = [f"{n}-{clip_end(t, chars, k)}" for n, t, k in before]
    if after:
        out["after"] = [f"{n}-{clip_end(t, chars, k)}" for n, t, k in after]
    clipped |= any(k > chars for _, _, k in (*before, *after))
    if hit.context is not None:
        lines = hit.context[: 2 * context + 1] if context else []
        clipped |= len(lines) < hit.context_total or any(k > chars for _, k in lines)
        if lines:
            out["context"] = [clip_end(t, chars, k) for t, k in lines]
    return out, clipped


def _first(item: Mapping[str, Any], keys: tuple[str, ...], kind: type[Any]) -> Any:
    for key in keys:
        value = item.get(key)
        if kind is int and isinstance(value, str) and value.isdigit():
            return int(value)
        if isinstance(value, kind) and not isinstance(value, bool):
            return value
    return None
