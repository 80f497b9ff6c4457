"""Small inline-SVG charts for the evaluation report: no plotting dependency, no JavaScript.

Each chart returns one ``<svg>`` element with a ``viewBox``; every text is escaped. Values outside a
chart's domain (a rate above 1, a whisker past the axis) are drawn at the domain's edge, so every
coordinate stays inside the viewBox. Exact values ride along in ``<title>`` tooltips and
``data-value`` attributes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["PALETTE", "Interval", "diverging_bars", "grouped_bars", "heatmap", "reliability"]

PALETTE: tuple[str, ...] = (
    "#3b6fb6",
    "#e07b39",
    "#4a9d5b",
    "#b8474d",
    "#7d5ba6",
    "#8c6d46",
    "#c05fa0",
    "#6b6b6b",
)
_CHAR_W = 6.4
"""Approximate width of one character of 11 px sans-serif text, in px (for layout only)."""
_GOOD = "#4a9d5b"
_BAD = "#b8474d"


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A measured value with its 95 % interval; ``value`` is None when nothing was measured."""

    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""
    """Extra tooltip text, e.g. ``"42/48"``; default empty."""


def _f(v: float) -> str:
    return f"{v:.1f}"


def _scale(v: float, d0: float, d1: float, r0: float, r1: float) -> float:
    """Map ``v`` from the domain [d0, d1] to [r0, r1], clamped to the domain."""
    t = (min(max(v, min(d0, d1)), max(d0, d1)) - d0) / (d1 - d0)
    return r0 + t * (r1 - r0)


def _clip(label: str, limit: int) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


class _Canvas:
    """Collects SVG elements; all numbers are formatted here and all text escaped here."""

    def __init__(self, width: float, height: float, title: str) -> None:
        self.width = math.ceil(width)
        self.height = math.ceil(height)
        self.title = title
        self.parts: list[str] = []

    def rect(self, x: float, y: float, w: float, h: float, fill: str, tip: str = "", attrs: str = "") -> None:
        inner = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(
            f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(max(w, 0.0))}" height="{_f(max(h, 0.0))}" '
            f'fill="{fill}"{attrs}>{inner}</rect>'
        )

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = "#999", attrs: str = "") -> None:
        self.parts.append(
            f'<line x1="{_f(x1)}" y1="{_f(y1)}" x2="{_f(x2)}" y2="{_f(y2)}" stroke="{stroke}"{attrs}/>'
        )

    def whisker(self, x: float, y1: float, y2: float, *, vertical: bool = True) -> None:
        if vertical:
            self.line(x, y1, x, y2, "#222")
            self.line(x - 3, y1, x + 3, y1, "#222")
            self.line(x - 3, y2, x + 3, y2, "#222")
        else:
            self.line(y1, x, y2, x, "#222")
            self.line(y1, x - 3, y1, x + 3, "#222")
            self.line(y2, x - 3, y2, x + 3, "#222")

    def circle(self, cx: float, cy: float, r: float, fill: str, tip: str = "") -> None:
        inner = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(f'<circle cx="{_f(cx)}" cy="{_f(cy)}" r="{_f(r)}" fill="{fill}">{inner}</circle>')

    def text(
        self,
        x: float,
        y: float,
        content: str,
        *,
        anchor: str = "start",
        size: int = 11,
        fill: str = "#222",
        rotate: int = 0,
        tip: str = "",
    ) -> None:
        transform = f' transform="rotate({rotate} {_f(x)} {_f(y)})"' if rotate else ""
        inner = f"<title>{escape(tip)}</title>" if tip else ""
        self.parts.append(
            f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}" font-size="{size}" '
            f'fill="{fill}"{transform}>{inner}{escape(content)}</text>'
        )

    def render(self) -> str:
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" aria-label="{escape(self.title)}" '
            f'font-family="system-ui, sans-serif"><title>{escape(self.title)}</title>'
            + "".join(self.parts)
            + "</svg>"
        )


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def _tip(label: str, iv: Interval, fmt: Callable[[float], str] = _pct) -> str:
    if iv.value is None:
        return f"{label}: not measured"
    ci = f" (95 % CI {fmt(iv.low)} – {fmt(iv.high)})" if iv.low is not None and iv.high is not None else ""
    note = f", {iv.note}" if iv.note else ""
    return f"{label}: {fmt(iv.value)}{ci}{note}"


def _legend(canvas: _Canvas, series: Sequence[str], x0: float, y: float) -> None:
    x = x0
    for i, name in enumerate(series):
        canvas.rect(x, y - 9, 10, 10, PALETTE[i % len(PALETTE)])
        canvas.text(x + 14, y, name)
        x += 14 + _CHAR_W * len(name) + 16


def grouped_bars(
    groups: Sequence[str],
    series: Sequence[str],
    value: Callable[[str, str], Interval],
    *,
    title: str,
    show_values: bool = False,
) -> str:
    """Rates in [0, 1] as bars grouped by ``groups``, one colour per series, with CI whiskers.

    ``value(group, series)`` gives each bar; a bar whose value is None is marked "n/a".
    ``show_values`` prints each rate above its bar (default False: tooltips only).
    """
    bar_w = 22 if len(series) <= 3 else 14
    group_w = max(70.0, len(series) * bar_w + 24)
    left, top, plot_h, bottom = 48.0, 40.0, 200.0, 30.0
    legend_w = sum(30 + _CHAR_W * len(s) for s in series)
    width = max(left + group_w * len(groups) + 16, left + legend_w + 16)
    canvas = _Canvas(width, top + plot_h + bottom, title)
    _legend(canvas, series, left, 16)
    base = top + plot_h
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = _scale(tick, 0, 1, base, top)
        canvas.line(left, y, left + group_w * len(groups), y, "#ddd")
        canvas.text(left - 6, y + 4, f"{int(tick * 100)} %", anchor="end", size=10)
    for g, group in enumerate(groups):
        gx = left + g * group_w + (group_w - len(series) * bar_w) / 2
        canvas.text(left + (g + 0.5) * group_w, base + 18, _clip(group, 14), anchor="middle", tip=group)
        for s, name in enumerate(series):
            iv = value(group, name)
            x = gx + s * bar_w
            cx = x + (bar_w - 2) / 2
            tip = _tip(f"{group} · {name}", iv)
            if iv.value is None:
                canvas.text(cx, base - 4, "n/a", anchor="middle", size=9, fill="#888", tip=tip)
                continue
            y = _scale(iv.value, 0, 1, base, top)
            color = PALETTE[s % len(PALETTE)]
            canvas.rect(x, y, bar_w - 2, base - y, color, tip, f' data-value="{iv.value!r}"')
            label_y = y
            if iv.low is not None and iv.high is not None:
                label_y = min(y, _scale(iv.high, 0, 1, base, top))
                canvas.whisker(cx, _scale(iv.low, 0, 1, base, top), label_y)
            if show_values:
                canvas.text(cx, label_y - 5, f"{100 * iv.value:.0f}", anchor="middle", size=9)
    canvas.line(left, base, left + group_w * len(groups), base, "#444")
    return canvas.render()


def _select_labels(labels: Sequence[str], matrix: Sequence[Sequence[int]], limit: int) -> list[int]:
    """Indices of at most ``limit`` labels, those most involved in confusions first, in input order."""
    if len(labels) <= limit:
        return list(range(len(labels)))
    n = len(labels)

    def weight(i: int) -> tuple[int, int]:
        off = sum(matrix[i][j] + matrix[j][i] for j in range(n) if j != i)
        return (off, matrix[i][i])

    keep = sorted(range(n), key=weight, reverse=True)[:limit]
    return sorted(keep)


def heatmap(labels: Sequence[str], matrix: Sequence[Sequence[int]], *, title: str, limit: int = 25) -> str:
    """A confusion matrix: rows are expected tools, columns chosen tools, every cell shows its count.

    Cell colour is the cell's share of its row (blue on the diagonal, red off it). With more than
    ``limit`` labels (default 25) only those most involved in confusions are drawn; the caller says so.
    """
    keep = _select_labels(labels, matrix, limit)
    names = [_clip(labels[i], 24) for i in keep]
    label_w = 12 + _CHAR_W * max((len(n) for n in names), default=1)
    cell = 30.0
    left, top = label_w + 22, label_w * 0.72 + 30
    width = left + cell * len(keep) + label_w * 0.72 + 8
    canvas = _Canvas(width, top + cell * len(keep) + 10, title)
    canvas.text(left + cell * len(keep) / 2, 14, "chosen tool", anchor="middle", size=10, fill="#555")
    canvas.text(
        12, top + cell * len(keep) / 2, "expected tool", anchor="middle", size=10, fill="#555", rotate=-90
    )
    for r, i in enumerate(keep):
        row_total = sum(matrix[i]) or 1
        y = top + r * cell
        canvas.text(left - 6, y + cell / 2 + 4, names[r], anchor="end", tip=labels[i])
        for c, j in enumerate(keep):
            count = matrix[i][j]
            share = count / row_total
            base = "59,111,182" if i == j else "184,71,77"
            fill = f"rgba({base},{0.08 + 0.92 * share:.2f})" if count else "#f6f6f6"
            tip = f"expected {labels[i]}, chose {labels[j]}: {count}"
            x = left + c * cell
            canvas.rect(x, y, cell - 1, cell - 1, fill, tip, f' data-value="{count}"')
            ink = "#fff" if count and share > 0.55 else ("#222" if count else "#bbb")
            canvas.text(x + cell / 2, y + cell / 2 + 4, str(count), anchor="middle", size=10, fill=ink)
    for c, j in enumerate(keep):
        x = left + c * cell + cell / 2
        canvas.text(x, top - 6, names[c], rotate=-45, size=10, tip=labels[j])
    return canvas.render()


def reliability(bins: Sequence[Mapping[str, Any]], *, title: str) -> str:
    """A reliability diagram: per confidence bin its accuracy as a bar, mean confidence as a dot.

    The dashed diagonal is perfect calibration; each non-empty bin shows its count above the bar.
    """
    left, top, size, bottom = 48.0, 24.0, 260.0, 40.0
    canvas = _Canvas(left + size + 24, top + size + bottom, title)
    base = top + size

    def sx(v: float) -> float:
        return _scale(v, 0, 1, left, left + size)

    def sy(v: float) -> float:
        return _scale(v, 0, 1, base, top)

    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        canvas.line(left, sy(tick), left + size, sy(tick), "#eee")
        canvas.text(left - 6, sy(tick) + 4, f"{tick:.2f}", anchor="end", size=10)
        canvas.text(sx(tick), base + 16, f"{tick:.2f}", anchor="middle", size=10)
    canvas.text(left + size / 2, base + 34, "confidence", anchor="middle", size=10, fill="#555")
    canvas.text(12, top + size / 2, "accuracy", anchor="middle", size=10, fill="#555", rotate=-90)
    for b in bins:
        count, acc, conf = int(b.get("count", 0)), b.get("accuracy"), b.get("confidence")
        if not count or acc is None:
            continue
        x0, x1 = sx(float(b["low"])), sx(float(b["high"]))
        tip = f"{b['low']:.2f}–{b['high']:.2f}: accuracy {acc:.3f}, n = {count}"
        if conf is not None:
            tip += f", mean confidence {conf:.3f}"
        canvas.rect(x0 + 1, sy(acc), x1 - x0 - 2, base - sy(acc), "rgba(59,111,182,0.55)", tip)
        canvas.text((x0 + x1) / 2, max(sy(acc) - 4, top + 8), str(count), anchor="middle", size=9)
        if conf is not None:
            canvas.circle(sx(conf), sy(acc), 3, "#b8474d", tip)
    canvas.line(sx(0), sy(0), sx(1), sy(1), "#444", ' stroke-dasharray="4 3"')
    canvas.line(left, base, left + size, base, "#444")
    canvas.line(left, top, left, base, "#444")
    return canvas.render()


def _pp(v: float) -> str:
    return f"{100 * v:+.1f} pp"


def diverging_bars(rows: Sequence[tuple[str, Interval]], *, title: str) -> str:
    """Signed deltas as horizontal bars left (worse) or right (better) of zero, with CI whiskers.

    The axis is symmetric, in steps of 10 percentage points, and covers every value and interval end.
    """
    labels = [_clip(label, 36) for label, _ in rows]
    left = 16 + _CHAR_W * max((len(x) for x in labels), default=1)
    plot_w, row_h, top, right = 320.0, 20.0, 24.0, 80.0
    ends = [abs(v) for _, iv in rows for v in (iv.value, iv.low, iv.high) if v is not None]
    extent = max(0.1, math.ceil(max(ends, default=0.0) * 10) / 10)
    canvas = _Canvas(left + plot_w + right, top + row_h * len(rows) + 28, title)

    def sx(v: float) -> float:
        return _scale(v, -extent, extent, left, left + plot_w)

    bottom = top + row_h * len(rows)
    for tick in (-extent, -extent / 2, 0.0, extent / 2, extent):
        canvas.line(sx(tick), top - 4, sx(tick), bottom, "#ddd" if tick else "#444")
        canvas.text(sx(tick), bottom + 16, f"{100 * tick:+.0f} pp" if tick else "0", anchor="middle", size=10)
    for r, ((label, iv), short) in enumerate(zip(rows, labels, strict=True)):
        y = top + r * row_h
        mid = y + row_h / 2
        canvas.text(left - 8, mid + 4, short, anchor="end", tip=label)
        if iv.value is None:
            canvas.text(sx(0) + 4, mid + 4, "n/a", size=9, fill="#888")
            continue
        x0, x1 = sorted((sx(0.0), sx(iv.value)))
        color = _GOOD if iv.value >= 0 else _BAD
        canvas.rect(x0, y + 4, x1 - x0, row_h - 8, color, _tip(label, iv, _pp), f' data-value="{iv.value!r}"')
        if iv.low is not None and iv.high is not None:
            canvas.whisker(mid, sx(iv.low), sx(iv.high), vertical=False)
        canvas.text(left + plot_w + 8, mid + 4, _pp(iv.value), size=10)
    return canvas.render()
