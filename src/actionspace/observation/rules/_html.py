"""The streaming HTML reader behind ``web-v1``: what a page shows and what can be acted on."""

from __future__ import annotations

import re
from collections import deque
from html.parser import HTMLParser
from typing import Any, Final

__all__ = ["RAW_CAP", "PageReader", "Text"]

PER_CLASS: Final = 300
"""Elements held per priority class (controls, content links, page chrome): the first half
and the latest half."""
OPTIONS: Final = 50
LABELS: Final = 1000
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
Text = tuple[str, int]
"""(first characters, full length) of a string that may be shown clipped."""


class _Open:
    __slots__ = ("captures", "chrome", "hidden", "quiet", "tag")

    def __init__(self, tag: str, hidden: bool, chrome: bool, quiet: bool) -> None:
        self.tag, self.hidden, self.chrome = tag, hidden, chrome
        self.quiet = quiet
        """Text that belongs to an element only (a title, the options of a select)."""
        self.captures: list[_Capture] = []


class _Group:
    """Elements of one priority class: the first ``PER_CLASS // 2`` and the latest ones."""

    __slots__ = ("head", "tail")

    def __init__(self) -> None:
        self.head: list[dict[str, Any]] = []
        self.tail: deque[dict[str, Any]] = deque(maxlen=PER_CLASS - PER_CLASS // 2)

    def add(self, record: dict[str, Any]) -> None:
        if len(self.head) < PER_CLASS // 2:
            self.head.append(record)
        else:
            self.tail.append(record)

    def records(self) -> list[dict[str, Any]]:
        return [*self.head, *self.tail]


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

    def text(self) -> Text:
        joined = " ".join("".join(self.parts).split())
        return joined, len(joined) + max(self.size - CAPTURE_CHARS, 0)


class PageReader(HTMLParser):
    """Collects title, headings, elements and text blocks while the page streams in."""

    def __init__(self, text_cap: int) -> None:
        super().__init__(convert_charrefs=True)
        self.text_cap = text_cap
        self.stack: list[_Open] = []
        self.captures: list[_Capture] = []
        self.title: Text | None = None
        self.headings: list[Text] = []
        self.groups = (_Group(), _Group(), _Group())
        self.next_index = 0
        self.labels: dict[str, Text] = {}
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
        if top is not None and top.quiet:
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

    def parse_html_declaration(self, i: int) -> int:
        try:
            return super().parse_html_declaration(i)
        except AssertionError:
            # ``<![weird …``: the standard parser gives up; HTML5 reads it as a bogus comment.
            end = self.rawdata.find(">", i)
            return -1 if end < 0 else end + 1

    def end(self) -> None:
        """Close the document: flush the parser, close open elements, attach ``label for=``."""
        if self.rawdata.startswith("<"):
            # Markup cut off by the end of the input (a comment, a tag, a script) shows nothing.
            self.rawdata = ""
        self.close()
        while self.stack:
            self._close(self.stack.pop())
        self.flush()
        for group in self.groups:
            for record in group.records():
                if "id" in record and "label" not in record and record["id"][0] in self.labels:
                    record["label"] = self.labels[record["id"][0]]

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
        quiet = (parent is not None and parent.quiet) or tag in ("title", "select")
        entry = _Open(tag, hidden, chrome, quiet)
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
            self._capture(entry, "option", (self.select, "selected" in attrs))
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
            record["options_total"] = 0
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
        self.groups[0 if not link else 2 if chrome else 1].add(record)
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
            if isinstance(capture.target, str) and len(self.labels) < LABELS:
                self.labels.setdefault(capture.target, text)
            for record in capture.target if isinstance(capture.target, list) else ():
                record.setdefault("label", text)
        elif capture.kind == "option":
            select, selected = capture.target
            select["options_total"] += 1
            if len(select["options"]) < OPTIONS:
                select["options"].append(text)
            if selected:
                select.setdefault("selected_option", text)
        else:
            capture.target.setdefault("text", text)
