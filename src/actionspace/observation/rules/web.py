"""``web-v1``: an HTML page keeps its interactive elements and its visible text.

``data`` is::

    {"url"?, "title", "headings": ["# Title", "## Section"],
     "elements": [{"i": 0, "tag": "a", "text": "Sign in", "href": "/login"},
                  {"i": 3, "tag": "input", "type": "email", "name": "email", "label": "Email", "form": 2}],
     "text": ["visible text, one entry per block"], "omitted_elements"?, "omitted_text_chars"?}

Interactive elements are ``a[href]``, ``button``, ``input`` (not ``type=hidden``), ``select`` (with
its first options), ``textarea``, ``form`` (``action``, ``method``), ``summary`` and anything with a
``role``. ``i`` numbers every interactive element in document order, whether shown or not, so an
index stays valid when the budget changes. Text inside ``script``, ``style``, ``noscript``,
``template``, ``svg``, and under ``hidden``, ``aria-hidden="true"`` or ``display:none`` is not
visible and is dropped (it is not counted as cut). When the budget is tight, form controls and
alerts are kept before links, and links in the page's content before links in ``nav``, ``header``,
``footer`` and ``aside``; text from the content is kept before text from those regions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any, ClassVar, Final

from actionspace.observation._canonical import clip_end, json_size
from actionspace.observation.rules._base import Source, TrimRule, small_fields
from actionspace.observation.rules.log import is_text

__all__ = ["WebRule"]

PER_CLASS: Final = 300
"""Elements collected per priority class (controls, content links, page chrome)."""
HEADINGS: Final = 50
BLOCK_CHARS: Final = 2000
CAPTURE_CHARS: Final = 300
RAW_CAP: Final = 256 * 1024
"""Unparsed markup held by the parser (an unterminated comment or script); the middle is dropped."""
MAX_DEPTH: Final = 512

_SKIP: Final = frozenset({"script", "style", "noscript", "template", "svg", "math"})
_VOID: Final = frozenset(
    ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
     "wbr")
)  # fmt: skip
_BLOCK: Final = frozenset(
    ("address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog", "div",
     "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
     "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody",
     "thead", "tfoot", "tr", "ul", "br", "option", "label", "legend")
)  # fmt: skip
_SPACED: Final = frozenset({"a", "button", "input", "select", "textarea", "img", "span", "td", "th"})
"""Inline elements whose neighbours read as separate words (``<a>Home</a><a>Shop</a>``)."""
_CHROME: Final = frozenset({"nav", "header", "footer", "aside"})
_CHROME_ROLES: Final = frozenset({"navigation", "banner", "contentinfo", "complementary", "menubar"})
_HEADING: Final = {f"h{n}": n for n in range(1, 7)}
_HIDDEN_STYLE: Final = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_ATTRS: Final = (
    "href", "type", "name", "value", "placeholder", "action", "method", "role", "aria-label",
    "title", "id",
)  # fmt: skip
_FLAGS: Final = ("disabled", "checked", "selected", "required", "multiple", "readonly")
_TEXT_KEYS: Final = ("html", "content", "body", "text")

_RUNGS: Final[tuple[tuple[int, int, int, int], ...]] = (
    # elements, chars per value, headings, options per select
    (300, 200, 50, 10),
    (200, 160, 40, 10),
    (150, 120, 30, 8),
    (100, 100, 20, 6),
    (60, 80, 15, 5),
    (40, 60, 10, 4),
    (25, 50, 8, 3),
    (15, 40, 5, 2),
    (10, 30, 3, 2),
    (5, 24, 2, 1),
    (2, 20, 1, 1),
    (0, 20, 0, 0),
)

_Text = tuple[str, int]
"""(first characters, full length) of a string that may be shown clipped."""


class _Open:
    __slots__ = ("captures", "chrome", "hidden", "tag")

    def __init__(self, tag: str, hidden: bool, chrome: bool) -> None:
        self.tag, self.hidden, self.chrome = tag, hidden, chrome
        self.captures: list[_Capture] = []


class _Capture:
    __slots__ = ("kind", "parts", "size", "target")

    def __init__(self, kind: str, target: Any) -> None:
        self.kind, self.target = kind, target
        self.parts: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        if self.size < CAPTURE_CHARS:
            self.parts.append(text[: CAPTURE_CHARS - self.size])
        self.size += len(text)

    def text(self) -> _Text:
        joined = " ".join("".join(self.parts).split())
        return joined, len(joined) + max(self.size - CAPTURE_CHARS, 0)


class _Reader(HTMLParser):
    """Collects title, headings, elements and text blocks while the page streams in."""

    def __init__(self, text_cap: int) -> None:
        super().__init__(convert_charrefs=True)
        self.text_cap = text_cap
        self.stack: list[_Open] = []
        self.captures: list[_Capture] = []
        self.title: _Text | None = None
        self.headings: list[_Text] = []
        self.elements: tuple[list[dict[str, Any]], ...] = ([], [], [])
        self.next_index = 0
        self.uncollected = 0
        self.labels: dict[str, _Text] = {}
        self.form: int | None = None
        self.select: dict[str, Any] | None = None
        self.blocks: list[tuple[str, int, bool]] = []
        self.collected = [0, 0]
        self.omitted_chars = 0
        self.lossy = False
        self._parts: list[str] = []
        self._size = 0
        self._chrome = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open(tag, {k: v or "" for k, v in attrs}, tag in _VOID)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open(tag, {k: v or "" for k, v in attrs}, True)

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, -1, -1):
            if self.stack[depth].tag == tag:
                while len(self.stack) > depth:
                    self._close(self.stack.pop())
                break
        if tag in _BLOCK:
            self.flush()
        elif tag in _SPACED and self._parts:
            self._parts.append(" ")

    def handle_data(self, data: str) -> None:
        top = self.stack[-1] if self.stack else None
        if top is not None and top.hidden:
            return
        for capture in self.captures:
            capture.add(data)
        if top is not None and top.tag == "title":
            return
        if not self._parts:
            self._chrome = top is not None and top.chrome
        if self._size < BLOCK_CHARS:
            self._parts.append(data[: BLOCK_CHARS - self._size])
        elif data.strip():
            self.lossy = True
        self._size += len(data)

    def flush(self) -> None:
        if not self._parts:
            return
        text = " ".join("".join(self._parts).split())
        self._parts, self._size = [], 0
        if not text:
            return
        chrome = int(self._chrome)
        if self.collected[chrome] >= self.text_cap:
            self.omitted_chars += len(text)
            self.lossy = True
            return
        self.collected[chrome] += len(text)
        self.blocks.append((text, len(text), self._chrome))

    def _open(self, tag: str, attrs: dict[str, str], void: bool) -> None:
        parent = self.stack[-1] if self.stack else None
        hidden = (
            (parent is not None and parent.hidden)
            or tag in _SKIP
            or "hidden" in attrs
            or attrs.get("aria-hidden", "").lower() == "true"
            or bool(_HIDDEN_STYLE.search(attrs.get("style", "")))
            or (tag == "input" and attrs.get("type", "").lower() == "hidden")
        )
        role = attrs.get("role", "").strip().lower()
        chrome = (parent is not None and parent.chrome) or tag in _CHROME or role in _CHROME_ROLES
        if tag in _BLOCK:
            self.flush()
        elif tag in ("td", "th") and self._parts:
            self._parts.append(" | ")
        elif tag in _SPACED and self._parts:
            self._parts.append(" ")
        entry = _Open(tag, hidden, chrome)
        if not hidden:
            self._visible(entry, tag, attrs, role)
        if void or len(self.stack) >= MAX_DEPTH:
            self._close(entry)
        else:
            self.stack.append(entry)

    def _visible(self, entry: _Open, tag: str, attrs: dict[str, str], role: str) -> None:
        if tag == "title" and self.title is None:
            self._capture(entry, "title", None)
        elif tag in _HEADING:
            self._capture(entry, "heading", _HEADING[tag])
        elif tag == "label":
            self._capture(entry, "label", attrs.get("for") or [])
        elif tag == "option" and self.select is not None:
            self._capture(entry, "option", self.select)
        elif tag == "img" and attrs.get("alt"):
            for capture in self.captures:
                if capture.kind == "element":
                    capture.add(f" {attrs['alt']} ")
        record = self._element(tag, attrs, role, entry.chrome)
        if record is None:
            return
        for capture in self.captures:
            if capture.kind == "label" and isinstance(capture.target, list):
                capture.target.append(record)
        if tag == "select":
            self.select = record
            record["options"] = []
        elif tag == "form":
            self.form = record["i"]
        elif tag != "input":
            self._capture(entry, "element", record)

    def _element(self, tag: str, attrs: dict[str, str], role: str, chrome: bool) -> dict[str, Any] | None:
        if not (
            (tag == "a" and "href" in attrs)
            or tag in ("button", "input", "select", "textarea", "form", "summary")
            or role
        ):
            return None
        record: dict[str, Any] = {"i": self.next_index, "tag": tag}
        self.next_index += 1
        for name in _ATTRS:
            value = attrs.get(name)
            if value:
                record["label" if name == "aria-label" else name] = (value[:BLOCK_CHARS], len(value))
        for name in _FLAGS:
            if name in attrs:
                record[name] = True
        if self.form is not None and tag != "form":
            record["form"] = self.form
        link = tag == "a" or role == "link" or role in _CHROME_ROLES
        group = self.elements[0 if not link else 2 if chrome else 1]
        if len(group) < PER_CLASS:
            group.append(record)
        else:
            self.uncollected += 1
        return record

    def _capture(self, entry: _Open, kind: str, target: Any) -> None:
        capture = _Capture(kind, target)
        entry.captures.append(capture)
        self.captures.append(capture)

    def _close(self, entry: _Open) -> None:
        if entry.tag == "form":
            self.form = None
        elif entry.tag == "select":
            self.select = None
        for capture in entry.captures:
            self.captures.remove(capture)
            self._captured(capture)

    def _captured(self, capture: _Capture) -> None:
        text = capture.text()
        if capture.size > CAPTURE_CHARS:
            self.lossy = True
        if not text[0]:
            return
        if capture.kind == "title":
            self.title = text
        elif capture.kind == "heading":
            if len(self.headings) < HEADINGS:
                self.headings.append(("#" * capture.target + " " + text[0], text[1] + capture.target + 1))
            else:
                self.lossy = True
        elif capture.kind == "label":
            if isinstance(capture.target, str):
                self.labels.setdefault(capture.target, text)
            for record in capture.target if isinstance(capture.target, list) else ():
                record.setdefault("label", text)
        elif capture.kind == "option":
            capture.target["options"].append(text)
        else:
            capture.target.setdefault("text", text)


class WebRule(TrimRule):
    """``web-v1`` (see the module docstring)."""

    name: ClassVar[str] = "web"
    version: ClassVar[str] = "1"

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(max_bytes=max_bytes, fields=fields)
        self._reader = _Reader(text_cap=max(4 * max_bytes, 8192))
        self._cut = False

    @classmethod
    def unwrap(cls, value: object) -> Source | None:
        if is_text(value) and not isinstance(value, list | tuple):
            return Source(text=value)
        if isinstance(value, Mapping):
            for key in _TEXT_KEYS:
                page = value.get(key)
                if page is not None and is_text(page) and not isinstance(page, list | tuple):
                    return Source(fields=small_fields(value, _TEXT_KEYS), text=page)
        return None

    def feed(self, chunk: str) -> None:
        reader = self._reader
        reader.feed(chunk)
        if len(reader.rawdata) > RAW_CAP:
            # Markup the parser cannot finish yet (a never-closed comment, script or tag) would
            # otherwise be held whole; its middle is not visible text, so keep only its ends.
            reader.rawdata = reader.rawdata[:1024] + reader.rawdata[-1024:]
            reader.lossy = True

    def finish(self) -> tuple[Any, bool]:
        reader = self._reader
        reader.close()
        while reader.stack:
            reader._close(reader.stack.pop())
        reader.flush()
        for group in reader.elements:
            for record in group:
                if "id" in record and "label" not in record and record["id"][0] in reader.labels:
                    record["label"] = reader.labels[record["id"][0]]
        reserve = self.max_bytes * 2 // 5
        text_size = sum(length + 3 for _, length, _ in reader.blocks)
        for rung in _RUNGS:
            base, lossy = self._base(rung)
            size = json_size(base)
            if size + min(text_size, reserve) > self.max_bytes and rung is not _RUNGS[-1]:
                continue
            data, text_lossy = self._fill(base, size)
            if json_size(data) <= self.max_bytes:
                self._cut = lossy or text_lossy or reader.lossy
                return data, self._cut
        return {"title": None, "elements": [], "text": [], "omitted_elements": reader.next_index}, True

    def _base(self, rung: tuple[int, int, int, int]) -> tuple[dict[str, Any], bool]:
        count, chars, headings, options = rung
        reader = self._reader
        chosen = [r for group in reader.elements for r in group][:count]
        chosen.sort(key=lambda record: int(record["i"]))
        lossy = len(chosen) < reader.next_index or len(reader.headings) > headings
        elements = []
        for record in chosen:
            shown, cut = _show(record, chars, options)
            elements.append(shown)
            lossy |= cut
        title = None
        if reader.title is not None:
            title = clip_end(reader.title[0], max(chars, 60), reader.title[1])
            lossy |= reader.title[1] > max(chars, 60)
        shown_headings = [clip_end(text, chars, length) for text, length in reader.headings[:headings]]
        lossy |= any(length > chars for _, length in reader.headings[:headings])
        data: dict[str, Any] = {
            **self.fields,
            "title": title,
            "headings": shown_headings,
            "elements": elements,
            "text": [],
        }
        if reader.next_index > len(chosen):
            data["omitted_elements"] = reader.next_index - len(chosen)
        return data, lossy

    def _fill(self, data: dict[str, Any], size: int) -> tuple[dict[str, Any], bool]:
        """Add text blocks, content before chrome, while they fit; returns whether any was cut.

        Blocks that fit whole are taken in priority order; the first one that does not fit is
        taken clipped when at least 60 bytes are left, and later, shorter blocks may still fit.
        """
        reader = self._reader
        order = sorted(range(len(reader.blocks)), key=lambda n: (reader.blocks[n][2], n))
        omitted = reader.omitted_chars
        budget = self.max_bytes - len(',"omitted_text_chars":') - 12
        chosen: dict[int, str] = {}
        clipped_one = False
        for n in order:
            text, length, _ = reader.blocks[n]
            cost = json_size(text) + (1 if chosen else 0)
            if size + cost <= budget:
                chosen[n] = text
                size += cost
                continue
            room = budget - size - (1 if chosen else 0)
            if not clipped_one and room >= 60:
                clipped_one = True
                keep = _longest_clip(text, length, room)
                if keep:
                    chosen[n] = clip_end(text, keep, length)
                    size += json_size(chosen[n]) + (1 if len(chosen) > 1 else 0)
                    omitted += length - keep
                    continue
            omitted += length
        data["text"] = [chosen[n] for n in sorted(chosen)]
        if omitted:
            data["omitted_text_chars"] = omitted
        return data, omitted > 0


def _longest_clip(text: str, length: int, room: int) -> int:
    """The most characters of ``text`` that, clipped with a marker, fit ``room`` bytes (0: none)."""
    low, high, best = 1, min(len(text), room), 0
    while low <= high:
        mid = (low + high) // 2
        if json_size(clip_end(text, mid, length)) <= room:
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


def _show(record: dict[str, Any], chars: int, options: int) -> tuple[dict[str, Any], bool]:
    out: dict[str, Any] = {}
    lossy = False
    for key, value in record.items():
        if isinstance(value, tuple):
            out[key] = clip_end(value[0], chars, value[1])
            lossy |= value[1] > chars
        elif key == "options":
            shown = value[:options]
            out[key] = [clip_end(text, chars, length) for text, length in shown]
            lossy |= len(shown) < len(value) or any(length > chars for _, length in shown)
        else:
            out[key] = value
    return out, lossy
