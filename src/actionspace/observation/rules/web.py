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
``footer`` and ``aside``; within each of those classes the first and the last elements are kept
(a results page keeps its first results and its "Next" link). Text from the content is kept
before text from those regions. A ``select`` shows its first options, ``options_total`` and
``selected_option``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from actionspace._canonical import clip_end, json_size
from actionspace.observation.rules._base import Source, TrimRule, small_fields
from actionspace.observation.rules._html import RAW_CAP, PageReader
from actionspace.observation.rules.log import is_text

__all__ = ["WebRule"]

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


class WebRule(TrimRule):
    """``web-v1`` (see the module docstring)."""

    name: ClassVar[str] = "web"
    version: ClassVar[str] = "1"

    def __init__(self, *, max_bytes: int, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(max_bytes=max_bytes, fields=fields)
        self._reader = PageReader(text_cap=max(4 * max_bytes, 8192))
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
        reader.end()
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
        chosen: list[dict[str, Any]] = []
        for group in reader.groups:
            records = group.records()
            quota = count - len(chosen)
            if len(records) <= quota:
                chosen += records
            else:
                front = (quota + 1) // 2
                chosen += records[:front] + records[len(records) - (quota - front) :]
                break
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
            lossy |= len(shown) < record["options_total"] or any(length > chars for _, length in shown)
        elif key == "options_total":
            if value > min(len(record["options"]), options):
                out[key] = value
        else:
            out[key] = value
    return out, lossy
