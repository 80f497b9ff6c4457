"""The evaluation report: parseable self-contained HTML, every section, exact numbers, escaping, bounds."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from actionspace.evaluation.outcomes import LAYERS, StepOutcome, TaskOutcome
from actionspace.evaluation.report import render_html, write_report


def _rate(passed: int, n: int, low: float, high: float) -> dict[str, Any]:
    return {"rate": passed / n if n else None, "low": low, "high": high, "passed": passed, "n": n}


def _layers(passed: list[int], n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    reached = n
    for layer, p in zip(LAYERS, passed, strict=True):
        out[layer] = {
            "conditional": _rate(p, reached, max(p / reached - 0.1, 0.0), min(p / reached + 0.05, 1.0)),
            "cumulative": _rate(p, n, max(p / n - 0.1, 0.0), min(p / n + 0.05, 1.0)),
        }
        reached = p
    return out


def _metrics() -> dict[str, Any]:
    return {
        "suite": "bfcl",
        "policy": "replay:ground-truth",
        "n_tasks": 48,
        "layers": _layers([47, 44, 40, 39, 36], 48),
        "by_category": {
            "normal": {"n": 30, "layers": _layers([30, 29, 27, 26, 24], 30)},
            "no_tool": {"n": 10, "layers": _layers([10, 9, 9, 9, 8], 10)},
            "near_name": {"n": 8, "layers": _layers([7, 6, 4, 4, 4], 8)},
        },
        "by_tool": {
            "weather.get_forecast": {"n": 20, "layers": _layers([20, 19, 18, 18, 17], 20)},
            "<script>": {"n": 10, "layers": _layers([10, 10, 9, 8, 7], 10)},
        },
        "confusion": {
            "labels": ["weather.get_forecast", "<script>", "<none>"],
            "matrix": [[19, 1, 0], [2, 7, 1], [0, 0, 10]],
        },
        "steps": {"mean": 1.375, "max": 4},
        "tokens": {"total": 12345, "mean": 257.1875},
        "recovery": {"errors": 6, "recovered": 4, "rate": 4 / 6},
        "incidents": {"total": 2, "by_kind": {"write_in_negative_task": 1, "duplicate_effect": 1}},
        "extra_calls": 3,
        "calibration": {
            "bins": [
                {"low": 0.0, "high": 0.5, "count": 0, "confidence": None, "accuracy": None},
                {"low": 0.5, "high": 0.75, "count": 12, "confidence": 0.63, "accuracy": 0.5},
                {"low": 0.75, "high": 1.0, "count": 30, "confidence": 0.91, "accuracy": 0.9},
            ],
            "ece": 0.0857,
        },
        "ablations": {
            "names_hidden": {
                "select": {
                    "baseline": 0.9167,
                    "variant": 0.75,
                    "delta": -0.1667,
                    "low": -0.31,
                    "high": -0.02,
                },
                "task": {"baseline": 0.75, "variant": 0.7, "delta": -0.05, "low": -0.2, "high": 0.1},
            },
            "enums_dropped": {
                "args": {"baseline": 0.8333, "variant": 0.8542, "delta": 0.0209, "low": -0.08, "high": 0.12},
            },
        },
    }


class _Tree(HTMLParser):
    """Collects elements as (tag, attrs, enclosing svg viewBox) and the text by element id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.stack: list[str] = []
        self.viewbox: str | None = None
        self.text_by_id: dict[str, str] = {}
        self._ids: list[tuple[str, int]] = []
        self.texts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.viewbox = a["viewbox"]
        self.elements.append((tag, a, self.viewbox))
        if tag not in ("meta", "line", "rect", "circle"):
            self.stack.append(tag)
            if "id" in a:
                self._ids.append((a["id"], len(self.stack)))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}, self.viewbox))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("meta", "line", "rect", "circle"):
            return
        assert self.stack and self.stack[-1] == tag, f"mismatched </{tag}> in {self.stack}"
        while self._ids and self._ids[-1][1] == len(self.stack):
            self._ids.pop()
        self.stack.pop()
        if tag == "svg":
            self.viewbox = None

    def handle_data(self, data: str) -> None:
        self.texts.append(data)
        for ident, _ in self._ids:
            self.text_by_id[ident] = self.text_by_id.get(ident, "") + data


def _parse(html: str) -> _Tree:
    tree = _Tree()
    tree.feed(html)
    tree.close()
    assert tree.stack == [], f"unclosed elements: {tree.stack}"
    return tree


def _ids(tree: _Tree) -> set[str]:
    return {a["id"] for _, a, _ in tree.elements if "id" in a}


def _table_rows(html: str, table_id: str) -> list[list[tuple[str, str]]]:
    """(data-value, text) of each cell of each body row of one table."""
    body = html.split(f'<table id="{table_id}">', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body.split("<tbody>", 1)[1])
    cell = re.compile(r"<t[dh]([^>]*)>(.*?)</t[dh]>")

    def value(attrs: str) -> str:
        found = re.search(r'data-value="([^"]*)"', attrs)
        return found.group(1) if found else ""

    return [[(value(a), re.sub(r"<[^>]+>", "", t)) for a, t in cell.findall(row)] for row in rows]


def test_write_report_writes_metrics_outcomes_and_a_self_contained_html(tmp_path: Path) -> None:
    outcome = TaskOutcome(
        suite="bfcl",
        task_id="simple_1",
        steps=(StepOutcome(index=0, parse_ok=True, select_ok=False),),
        run_id="run-1",
    )
    path = write_report(_metrics(), tmp_path / "out", outcomes=[outcome])
    assert path == tmp_path / "out" / "report.html"
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert written["detail"] == _metrics()
    assert written["n"] == _metrics()["n_tasks"]
    assert written["layers"]["p_parse"] == _metrics()["layers"]["parse"]["cumulative"]["rate"]
    assert written["conditional"]["p_task"] == _metrics()["layers"]["task"]["conditional"]["rate"]
    assert set(written["by_category"]["normal"]["layers"]) == {
        "p_parse",
        "p_select",
        "p_args",
        "p_exec",
        "p_task",
    }
    [line] = (tmp_path / "out" / "outcomes.jsonl").read_text().splitlines()
    assert TaskOutcome.from_dict(json.loads(line)) == outcome
    html = path.read_text()
    tree = _parse(html)
    tags = {t for t, _, _ in tree.elements}
    assert "script" not in tags and "link" not in tags and "img" not in tags
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "simple_1" in tree.text_by_id["failures"] and "p_select" in tree.text_by_id["failures"]


def test_outcomes_file_is_written_only_when_outcomes_are_given(tmp_path: Path) -> None:
    write_report(_metrics(), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json", "report.html"]


def test_every_section_is_present_with_a_plot() -> None:
    tree = _parse(render_html(_metrics()))
    sections = [
        "summary",
        "funnel",
        "categories",
        "tools",
        "confusion",
        "calibration",
        "ablations",
        "incidents",
    ]
    assert set(sections) <= _ids(tree)
    for name in ("funnel", "categories", "confusion", "calibration", "ablations"):
        html = render_html(_metrics()).split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]
        assert html.count("<svg ") == 1, name
    assert tree.text_by_id["policy"] == "replay:ground-truth"
    assert tree.text_by_id["n-tasks"] == "48"


def test_headline_numbers_match_the_metrics_dict() -> None:
    metrics = _metrics()
    html = render_html(metrics)
    rows = _table_rows(html, "headline")
    assert [r[0][1] for r in rows] == [f"p_{layer}" for layer in LAYERS]
    for row, layer in zip(rows, LAYERS, strict=True):
        for offset, kind in ((1, "cumulative"), (3, "conditional")):
            rate = metrics["layers"][layer][kind]
            assert float(row[offset][0]) == rate["rate"]
            assert row[offset][1].startswith(f"{100 * rate['rate']:.1f} %")
            assert f"{100 * rate['low']:.1f} %" in row[offset][1]
            assert row[offset + 1] == (f"{rate['passed']}/{rate['n']}",) * 2
    other = {text: value for (_, text), (value, _) in _table_rows(html, "headline-other")}
    assert float(other["mean steps"]) == 1.375
    assert int(other["total tokens"]) == 12345
    assert float(other["recovery rate"]) == 4 / 6
    assert float(other["ECE"]) == 0.0857
    assert int(other["extra calls (speculation)"]) == 3


def test_breakdowns_and_ablation_table_match_the_metrics_dict() -> None:
    metrics = _metrics()
    html = render_html(metrics)
    categories = _table_rows(html, "categories-table")
    assert [r[0][1] for r in categories] == ["normal", "no_tool", "near_name"]
    near = categories[2]
    assert int(near[1][0]) == 8
    assert near[2 + 2 * LAYERS.index("args") + 1][0] == "4/8"
    ablations = _table_rows(html, "ablations-table")
    assert [(r[0][1], r[1][1]) for r in ablations] == [
        ("names_hidden", "p_select"),
        ("names_hidden", "p_task"),
        ("enums_dropped", "p_args"),
    ]
    assert float(ablations[0][4][0]) == -0.1667 and ablations[0][4][1] == "-16.7 pp"
    incidents = dict((r[0][1], int(r[1][0])) for r in _table_rows(html, "incidents-table"))
    assert incidents == {"write_in_negative_task": 1, "duplicate_effect": 1}


def test_plot_values_match_the_metrics_dict() -> None:
    metrics = _metrics()
    html = render_html(metrics)
    funnel = html.split('<section id="funnel">', 1)[1].split("</section>", 1)[0]
    bars = [float(v) for v in re.findall(r'<rect [^>]*data-value="([^"]+)"', funnel)]
    expected = [
        metrics["layers"][layer][kind]["rate"] for layer in LAYERS for kind in ("cumulative", "conditional")
    ]
    assert bars == expected
    confusion = html.split('<section id="confusion">', 1)[1].split("</section>", 1)[0]
    cells = [int(v) for v in re.findall(r'<rect [^>]*data-value="([^"]+)"', confusion)]
    assert cells == [c for row in metrics["confusion"]["matrix"] for c in row]
    assert "ECE = 0.086 over 42 decisions" in html


def test_names_from_the_metrics_are_escaped() -> None:
    metrics = _metrics()
    metrics["suite"] = "<b>suite</b>"
    metrics["ablations"]["<img src=x>"] = {
        "task": {"baseline": 1, "variant": 1, "delta": 0, "low": 0, "high": 0}
    }
    html = render_html(metrics)
    assert "<script>" not in html and "<img" not in html and "<b>suite" not in html
    assert "&lt;script&gt;" in html and "&lt;img src=x&gt;" in html
    tree = _parse(html)
    assert "<script>" in "".join(tree.texts)
    assert "script" not in {t for t, _, _ in tree.elements}


def test_empty_sections_say_so_instead_of_drawing_an_empty_plot() -> None:
    metrics = _metrics()
    metrics["calibration"] = {
        "bins": [{"low": 0.0, "high": 1.0, "count": 0, "confidence": None, "accuracy": None}],
        "ece": None,
    }
    metrics["ablations"] = {}
    metrics["confusion"] = {"labels": [], "matrix": []}
    metrics["incidents"] = {"total": 0, "by_kind": {}}
    html = render_html(metrics)
    tree = _parse(html)
    for name in ("calibration", "ablations", "confusion", "incidents"):
        section = html.split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]
        assert "<svg" not in section and "<table" not in section, name
        assert 'class="empty"' in section, name
    assert "no reliability diagram" in tree.text_by_id["calibration"]
    assert "No ablation was run" in tree.text_by_id["ablations"]
    assert html.count("<svg ") == 2  # funnel and categories remain


def test_a_run_with_no_tasks_still_renders_every_section() -> None:
    metrics = {"suite": "demo", "policy": "scripted", "n_tasks": 0, "layers": {}}
    tree = _parse(render_html(metrics))
    assert {"summary", "funnel", "categories", "confusion", "calibration", "ablations"} <= _ids(tree)
    assert "<svg" not in render_html(metrics)


def _numbers(attrs: dict[str, str], names: tuple[str, ...]) -> list[float]:
    return [float(attrs[n]) for n in names if n in attrs]


def test_every_svg_coordinate_lies_inside_its_view_box() -> None:
    metrics = _metrics()
    # values outside the axes' domain must still be drawn inside the plot
    metrics["layers"]["task"]["conditional"]["high"] = 1.3
    metrics["ablations"]["names_hidden"]["task"]["low"] = -2.0
    many = [f"tool_{i:02d}" for i in range(40)]
    metrics["confusion"] = {
        "labels": many,
        "matrix": [[(3 if i == j else int((i * j) % 7 == 0)) for j in range(40)] for i in range(40)],
    }
    tree = _parse(render_html(metrics))
    checked = 0
    for tag, attrs, viewbox in tree.elements:
        if viewbox is None or tag == "svg":
            continue
        _, _, width, height = (float(v) for v in viewbox.split())
        xs = _numbers(attrs, ("x", "x1", "x2", "cx"))
        ys = _numbers(attrs, ("y", "y1", "y2", "cy"))
        if "width" in attrs:
            xs.append(float(attrs["x"]) + float(attrs["width"]))
            ys.append(float(attrs["y"]) + float(attrs["height"]))
        assert all(0 <= x <= width for x in xs), (tag, attrs, viewbox)
        assert all(0 <= y <= height for y in ys), (tag, attrs, viewbox)
        checked += bool(xs or ys)
    assert checked > 100


def test_a_large_confusion_matrix_is_cut_to_the_most_confused_tools() -> None:
    metrics = copy.deepcopy(_metrics())
    labels = [f"t{i}" for i in range(30)] + ["confused_a", "confused_b"]
    n = len(labels)
    matrix = [[5 if i == j else 0 for j in range(n)] for i in range(n)]
    matrix[30][31] = 4
    metrics["confusion"] = {"labels": labels, "matrix": matrix}
    html = render_html(metrics)
    section = html.split('<section id="confusion">', 1)[1].split("</section>", 1)[0]
    assert "Showing the 25 of 32 tools" in section
    assert "expected confused_a, chose confused_b: 4" in section
    assert section.count("<rect ") == 25 * 25


def test_disagreements_are_listed_when_the_metrics_carry_them() -> None:
    metrics = _metrics()
    assert "disagreements" not in _ids(_parse(render_html(metrics)))
    metrics["disagreements"] = [
        {"task_id": "parallel_3", "ours": "args", "reference": "<cannot_find_match>"},
        "free-form note",
    ]
    html = render_html(metrics)
    rows = _table_rows(html, "disagreements-table")
    assert [text for _, text in rows[0]] == ["parallel_3", "args", "&lt;cannot_find_match&gt;", ""]
    assert [text for _, text in rows[1]] == ["", "", "", "free-form note"]


def test_a_suite_of_many_tools_lists_only_its_worst_tools(tmp_path: Path) -> None:
    from actionspace.evaluation.report import MAX_TOOL_ROWS

    metrics = _metrics()
    many = {
        f"tool_{i:04d}": {"n": 1, "layers": _layers([1, 1, 1, 1, 1 if i else 0], 1)}
        for i in range(MAX_TOOL_ROWS + 50)
    }
    metrics["by_tool"] = many
    html = write_report(metrics, tmp_path).read_text()
    assert "tool_0000" in html  # the only failing tool is kept
    assert html.count("<th>tool_0") == MAX_TOOL_ROWS
    assert f"of {MAX_TOOL_ROWS + 50}" in html
