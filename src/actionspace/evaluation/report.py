"""The evaluation report: ``metrics.json``, ``outcomes.jsonl`` and one self-contained ``report.html``.

The HTML has no external assets and needs no JavaScript: CSS is inline and the plots are inline SVG
(layer funnel, per-category bars, confusion matrix, reliability diagram, ablation deltas). Every
text from the metrics (suite, policy, tool and category names) is HTML-escaped. A section without
data says so in a sentence instead of drawing an empty plot. Numeric table cells carry the exact
value in a ``data-value`` attribute next to the rounded text.

Input is the metrics dict produced by :func:`actionspace.evaluation.metrics.summarize`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from actionspace.evaluation import _svg
from actionspace.evaluation._bfcl_leaderboard import leaderboard_html
from actionspace.evaluation.outcomes import CATEGORIES, LAYERS, TaskOutcome, outcomes_to_jsonl

__all__ = ["render_html", "write_report"]

_MAX_ROWS = 200
"""Most rows listed in the failures and disagreements tables."""

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;padding:0 1rem;color:#222;
line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2.2rem}
.meta{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.6rem 0;font-size:.92rem}
th,td{border:1px solid #ddd;padding:.25rem .55rem;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f4f4f4}
figure{margin:.8rem 0;overflow-x:auto}figcaption{color:#555;font-size:.9rem}
.empty{color:#777;font-style:italic}
.ci{color:#777;font-size:.85em}
"""


def write_report(metrics: Mapping[str, Any], out_dir: Path, *, outcomes: Sequence[TaskOutcome] = ()) -> Path:
    """Write ``metrics.json``, ``outcomes.jsonl`` (only when outcomes are given) and ``report.html``.

    ``out_dir`` is created if missing; existing files of those names are replaced.
    Returns the path of ``report.html``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    from actionspace.evaluation.metrics import public_metrics

    text = json.dumps(public_metrics(metrics), indent=2, allow_nan=False, default=str)
    (out_dir / "metrics.json").write_text(text + "\n", encoding="utf-8")
    if outcomes:
        (out_dir / "outcomes.jsonl").write_text(outcomes_to_jsonl(outcomes), encoding="utf-8")
    path = out_dir / "report.html"
    path.write_text(render_html(metrics, outcomes=outcomes), encoding="utf-8")
    return path


def render_html(metrics: Mapping[str, Any], *, outcomes: Sequence[TaskOutcome] = ()) -> str:
    """The report as one HTML document (a string); see the module docstring."""
    suite, policy = str(metrics.get("suite", "")), str(metrics.get("policy", ""))
    sections = [
        _summary(metrics),
        _funnel(metrics),
        _categories(metrics),
        _tools(metrics),
        _confusion(metrics),
        _calibration(metrics),
        _ablations(metrics),
        _incidents(metrics),
        _failures(outcomes),
        _disagreements(metrics),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(suite)} · {escape(policy)} — evaluation report</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<header><h1>Evaluation: {escape(suite)}</h1>"
        f'<p class="meta">policy <b id="policy">{escape(policy)}</b> · '
        f'<b id="n-tasks">{int(metrics.get("n_tasks", 0))}</b> tasks</p></header>'
        + "".join(s for s in sections if s)
        + "</body></html>\n"
    )


# ---------------------------------------------------------------- formatting helpers


def _section(ident: str, title: str, body: str) -> str:
    return f'<section id="{ident}"><h2>{escape(title)}</h2>{body}</section>'


def _empty(sentence: str) -> str:
    return f'<p class="empty">{escape(sentence)}</p>'


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>"


def _num(value: float | int | None, text: str) -> str:
    """A numeric cell: the exact value in ``data-value``, ``text`` shown."""
    if value is None:
        return '<td class="num" data-value="">—</td>'
    return f'<td class="num" data-value="{escape(repr(value))}">{escape(text)}</td>'


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f} %"


def _rate_cells(rate: Mapping[str, Any]) -> str:
    """Rate (with CI) and passed/n cells for one RATE dict."""
    value, low, high = rate.get("rate"), rate.get("low"), rate.get("high")
    ci = (
        f'<span class="ci"> [{_pct(low)} – {_pct(high)}]</span>'
        if low is not None and high is not None
        else ""
    )
    shown = "—" if value is None else _pct(value)
    exact = "" if value is None else repr(value)
    return (
        f'<td class="num" data-value="{exact}">{escape(shown)}{ci}</td>'
        f'<td class="num" data-value="{int(rate.get("passed", 0))}/{int(rate.get("n", 0))}">'
        f"{int(rate.get('passed', 0))}/{int(rate.get('n', 0))}</td>"
    )


def _table(head: Iterable[str], rows: Iterable[str], ident: str = "") -> str:
    id_attr = f' id="{ident}"' if ident else ""
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    return f"<table{id_attr}><thead><tr>{header}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _interval(rate: Mapping[str, Any] | None) -> _svg.Interval:
    if not rate:
        return _svg.Interval(value=None)
    return _svg.Interval(
        value=rate.get("rate"),
        low=rate.get("low"),
        high=rate.get("high"),
        note=f"{int(rate.get('passed', 0))}/{int(rate.get('n', 0))}",
    )


def _layer_table(layers: Mapping[str, Any], ident: str) -> str:
    rows = []
    for layer in _ordered(layers, LAYERS):
        entry = layers[layer]
        rows.append(
            f"<tr><th>p_{escape(layer)}</th>"
            + _rate_cells(entry.get("cumulative", {}))
            + _rate_cells(entry.get("conditional", {}))
            + "</tr>"
        )
    return _table(["layer", "cumulative", "passed/n", "conditional", "passed/n"], rows, ident)


def _ordered(keys: Iterable[str], order: Sequence[str]) -> list[str]:
    """``keys`` in the canonical ``order`` first, any others after in their given order."""
    present = list(keys)
    return [k for k in order if k in present] + [k for k in present if k not in order]


# ---------------------------------------------------------------- sections


def _summary(metrics: Mapping[str, Any]) -> str:
    layers = metrics.get("layers") or {}
    body = _layer_table(layers, "headline") if layers else _empty("No layer rates were computed.")
    steps = metrics.get("steps") or {}
    tokens = metrics.get("tokens") or {}
    recovery = metrics.get("recovery") or {}
    incidents = metrics.get("incidents") or {}
    calibration = metrics.get("calibration") or {}
    mean_steps, mean_tokens = steps.get("mean"), tokens.get("mean")
    ece, undecided = calibration.get("ece"), metrics.get("exec_outcomes") or {}
    rows = [
        ("mean steps", "steps-mean", mean_steps, "—" if mean_steps is None else f"{mean_steps:.2f}"),
        ("max steps", "steps-max", steps.get("max"), str(steps.get("max", "—"))),
        ("total tokens", "tokens-total", tokens.get("total"), f"{tokens.get('total') or 0:,}"),
        ("mean tokens", "tokens-mean", mean_tokens, "—" if mean_tokens is None else f"{mean_tokens:.1f}"),
        ("errors", "recovery-errors", recovery.get("errors"), str(recovery.get("errors", "—"))),
        ("recovered", "recovery-recovered", recovery.get("recovered"), str(recovery.get("recovered", "—"))),
        ("recovery rate", "recovery-rate", recovery.get("rate"), _pct(recovery.get("rate"))),
        (
            "side-effect incidents",
            "incidents-total",
            incidents.get("total"),
            str(incidents.get("total", "—")),
        ),
        (
            "extra calls (speculation)",
            "extra-calls",
            metrics.get("extra_calls"),
            str(metrics.get("extra_calls")),
        ),
        ("ECE", "ece", ece, "—" if ece is None else f"{ece:.3f}"),
    ]
    rows += [(f"{state} at exec (not rated)", f"exec-{state}", n, str(n)) for state, n in undecided.items()]
    other = _table(
        ["measure", "value"],
        (f'<tr id="{i}"><th>{escape(name)}</th>{_num(v, text)}</tr>' for name, i, v, text in rows),
        "headline-other",
    )
    return _section("summary", "Headline numbers", body + other)


def _funnel(metrics: Mapping[str, Any]) -> str:
    layers: Mapping[str, Any] = metrics.get("layers") or {}
    if not layers or not int(metrics.get("n_tasks", 0)):
        return _section("funnel", "Layer funnel", _empty("No tasks were evaluated, so there is no funnel."))
    names = _ordered(layers, LAYERS)
    svg = _svg.grouped_bars(
        names,
        ["cumulative", "conditional"],
        lambda layer, kind: _interval(layers[layer].get(kind)),
        title="Pass rate per layer",
        show_values=True,
    )
    caption = (
        "Pass rate per layer, cumulative (every layer so far passed, of all tasks) and conditional "
        "(of the tasks that reached the layer); whiskers are Wilson 95 % intervals."
    )
    return _section("funnel", "Layer funnel", _figure(svg, caption))


MAX_TOOL_ROWS = 100
"""A suite of thousands of tools lists its worst tools here; metrics.json keeps them all."""


def _breakdown(ident: str, title: str, groups: Mapping[str, Any], order: Sequence[str], what: str) -> str:
    if not groups:
        return _section(ident, title, _empty(f"No {what} breakdown is available."))
    names = _ordered(groups, order)
    rows = []
    for name in names:
        entry = groups[name]
        layer_cells = "".join(
            _rate_cells((entry.get("layers") or {}).get(layer, {}).get("cumulative", {})) for layer in LAYERS
        )
        rows.append(f"<tr><th>{escape(name)}</th>{_num(int(entry.get('n', 0)), str(entry.get('n', 0)))}")
        rows.append(layer_cells + "</tr>")
    head = [what, "n"] + [h for layer in LAYERS for h in (f"p_{layer}", "passed/n")]
    return _section(ident, title, _table(head, rows, f"{ident}-table"))


def _categories(metrics: Mapping[str, Any]) -> str:
    groups: Mapping[str, Any] = metrics.get("by_category") or {}
    section = _breakdown("categories", "By category", groups, CATEGORIES, "category")
    if not groups:
        return section
    names = _ordered(groups, CATEGORIES)
    svg = _svg.grouped_bars(
        list(LAYERS),
        names,
        lambda layer, cat: _interval(((groups[cat].get("layers") or {}).get(layer) or {}).get("cumulative")),
        title="Cumulative pass rate per layer and category",
    )
    caption = "Cumulative pass rate per layer, one bar per task category; whiskers are 95 % intervals."
    head, sep, tail = section.partition("</h2>")
    return head + sep + _figure(svg, caption) + tail


def _tools(metrics: Mapping[str, Any]) -> str:
    tools: Mapping[str, Any] = metrics.get("by_tool") or {}
    if len(tools) <= MAX_TOOL_ROWS:
        return _breakdown("tools", "By expected tool", tools, (), "tool")

    def task_rate(name: str) -> float:
        cumulative = ((tools[name].get("layers") or {}).get("task") or {}).get("cumulative") or {}
        rate = cumulative.get("rate")
        return 1.0 if rate is None else float(rate)

    worst = sorted(tools, key=lambda name: (task_rate(name), name))[:MAX_TOOL_ROWS]
    section = _breakdown("tools", "By expected tool", {name: tools[name] for name in worst}, (), "tool")
    note = (
        f"<p>The {MAX_TOOL_ROWS} tools with the lowest p_task of {len(tools)}; "
        "every tool is in metrics.json.</p>"
    )
    head, sep, tail = section.partition("</h2>")
    return head + sep + note + tail


def _confusion(metrics: Mapping[str, Any]) -> str:
    confusion = metrics.get("confusion") or {}
    labels = [str(x) for x in confusion.get("labels") or []]
    matrix = [[int(c) for c in row] for row in confusion.get("matrix") or []]
    if not labels or not any(any(row) for row in matrix):
        return _section("confusion", "Confusion matrix", _empty("No tool choices were recorded."))
    limit = 25
    svg = _svg.heatmap(labels, matrix, title="Tools chosen (columns) for expected tools (rows)", limit=limit)
    caption = "Rows: the expected tool; columns: the tool chosen (<none>: no call). Colour: share of the row."
    if len(labels) > limit:
        caption += f" Showing the {limit} of {len(labels)} tools most involved in confusions."
    off = sum(matrix[i][j] for i in range(len(labels)) for j in range(len(labels)) if i != j)
    caption += f" Off-diagonal choices: {off}."
    return _section("confusion", "Confusion matrix", _figure(svg, caption))


def _calibration(metrics: Mapping[str, Any]) -> str:
    calibration = metrics.get("calibration") or {}
    bins = [
        b for b in calibration.get("bins") or [] if int(b.get("count", 0)) and b.get("accuracy") is not None
    ]
    if not bins:
        sentence = "The policy reported no tool-choice confidence, so there is no reliability diagram."
        return _section("calibration", "Calibration", _empty(sentence))
    ece = calibration.get("ece")
    svg = _svg.reliability(bins, title="Reliability diagram")
    n = sum(int(b["count"]) for b in bins)
    ece_text = "not computed" if ece is None else f"{ece:.3f}"
    caption = (
        f"Accuracy per confidence bin (bars, count above) against mean confidence (dots); the dashed "
        f"diagonal is perfect calibration. ECE = {ece_text} over {n} decisions."
    )
    body = _figure(svg, caption) + _thresholds(metrics.get("thresholds"))
    return _section("calibration", "Calibration", body)


def _thresholds(report: Any) -> str:
    """What the risk-dependent threshold policy would have done with the same confidences."""
    if not isinstance(report, Mapping) or not report.get("steps"):
        return ""
    policy = report.get("policy") or {}
    rows = [
        "<tr>"
        + "".join(
            f"<td>{escape(str(v))}</td>"
            for v in (
                report.get("steps"),
                report.get("executed"),
                report.get("observe_more"),
                report.get("ask_user"),
                _pct(report.get("coverage")),
                _pct(report.get("accuracy")),
                report.get("wrong_avoided"),
                report.get("correct_deferred"),
            )
        )
        + "</tr>"
    ]
    head = [
        "steps",
        "executed",
        "observe more",
        "ask user",
        "coverage",
        "accuracy",
        "wrong avoided",
        "right held back",
    ]
    limits = ", ".join(f"{k} ≥ {v}" for k, v in policy.items()) if policy else "default thresholds"
    return (
        f"<h3>Risk-dependent thresholds ({escape(limits)})</h3>"
        "<p>Execute when the confidence reaches the threshold of the riskiest call's effect; otherwise look "
        "at read-only evidence first, or ask the user.</p>" + _table(head, rows, "thresholds-table")
    )


def _ablations(metrics: Mapping[str, Any]) -> str:
    ablations: Mapping[str, Any] = metrics.get("ablations") or {}
    rows: list[tuple[str, _svg.Interval]] = []
    cells: list[str] = []
    for variant, per_layer in ablations.items():
        for layer in _ordered(per_layer or {}, LAYERS):
            d = per_layer[layer]
            iv = _svg.Interval(value=d.get("delta"), low=d.get("low"), high=d.get("high"))
            rows.append((f"{variant} · {layer}", iv))
            cells.append(
                f"<tr><th>{escape(variant)}</th><td>p_{escape(layer)}</td>"
                + "".join(_num(d.get(k), _pct(d.get(k))) for k in ("baseline", "variant"))
                + "".join(_num(d.get(k), _signed(d.get(k))) for k in ("delta", "low", "high"))
                + "</tr>"
            )
    if not rows:
        return _section("ablations", "Ablations", _empty("No ablation was run."))
    svg = _svg.diverging_bars(rows, title="Change per layer under each ablation")
    caption = (
        "Cumulative pass rate of the variant minus the baseline, in percentage points, per layer; "
        "left of zero is worse. Whiskers are 95 % intervals of the difference."
    )
    table = _table(["variant", "layer", "baseline", "variant", "Δ", "low", "high"], cells, "ablations-table")
    return _section("ablations", "Ablations", _figure(svg, caption) + table)


def _signed(v: float | None) -> str:
    return "—" if v is None or math.isnan(v) else f"{100 * v:+.1f} pp"


def _incidents(metrics: Mapping[str, Any]) -> str:
    by_kind: Mapping[str, Any] = (metrics.get("incidents") or {}).get("by_kind") or {}
    if not by_kind:
        body = _empty("No side-effect incident was recorded.") + _gating(metrics.get("gating"))
        return _section("incidents", "Side-effect incidents", body)
    rows = (f"<tr><th>{escape(k)}</th>{_num(int(v), str(v))}</tr>" for k, v in sorted(by_kind.items()))
    body = _table(["kind", "count"], rows, "incidents-table") + _gating(metrics.get("gating"))
    return _section("incidents", "Side-effect incidents", body)


def _gating(report: Any) -> str:
    """The same tasks run again with a run-time confidence gate, beside the ungated run."""
    if not isinstance(report, Mapping):
        return ""
    un, ga = report.get("ungated") or {}, report.get("gated") or {}
    rows = [
        f"<tr><th>{escape(name)}</th><td>{_pct(run.get('p_exec'))}</td><td>{_pct(run.get('p_task'))}</td>"
        f"<td>{escape(str(run.get('incidents')))}</td></tr>"
        for name, run in (("ungated", un), ("gated", ga))
    ]
    limits = ", ".join(f"{k} ≥ {v}" for k, v in (report.get("policy") or {}).items())
    return (
        f"<h3>Run-time gate ({escape(limits)})</h3><p>Wrong writes avoided: "
        f"{escape(str(report.get('wrong_writes_avoided')))}; questions asked: "
        f"{escape(str(report.get('questions_asked')))}; refused to look further: "
        f"{escape(str(report.get('looked_further')))}; right calls held: "
        f"{escape(str(report.get('right_calls_held')))}.</p>"
        + _table(["run", "p_exec", "p_task", "incidents"], rows, "gating-table")
    )


def _first_failure(outcome: TaskOutcome) -> str | None:
    for layer in LAYERS:
        if outcome.layer(layer) is False:
            return layer
    return None


def _failures(outcomes: Sequence[TaskOutcome]) -> str:
    if not outcomes:
        return ""
    failed = [(o, layer) for o in outcomes if (layer := _first_failure(o)) is not None]
    if not failed:
        return _section("failures", "Failed tasks", _empty("Every task passed every layer it reached."))
    rows = [
        f"<tr><td>{escape(o.task_id)}</td><td>{escape(o.category)}</td><td>{escape(o.variant)}</td>"
        f"<td>p_{escape(layer)}</td><td>{escape(o.run_id or '')}</td></tr>"
        for o, layer in failed[:_MAX_ROWS]
    ]
    note = f"<p>{len(failed)} of {len(outcomes)} tasks failed a layer"
    note += f"; the first {_MAX_ROWS} are listed.</p>" if len(failed) > _MAX_ROWS else ".</p>"
    head = ["task", "category", "variant", "first failed layer", "run"]
    return _section("failures", "Failed tasks", note + _table(head, rows, "failures-table"))


def _reference_note(metrics: Mapping[str, Any]) -> str:
    """One paragraph: what was compared, and what each side says where both reject."""
    summary = metrics.get("reference_checker")
    if not isinstance(summary, Mapping):
        return ""
    both = summary.get("both_reject") or {}
    text = (
        f"{escape(str(summary.get('checker')))} on the same outputs: {summary.get('compared', 0)} tasks "
        f"compared, {summary.get('agree', 0)} agree, {summary.get('disagree', 0)} disagree"
    )
    explained = summary.get("by_explanation") or {}
    if explained:
        text += " (" + ", ".join(f"{escape(str(k))}: {v}" for k, v in explained.items()) + ")"
    text += "."
    if both.get("bfcl"):
        text += (
            " Where both reject, BFCL says "
            + ", ".join(f"{escape(str(k))} × {v}" for k, v in both["bfcl"].items())
            + "; we say "
            + ", ".join(f"{escape(str(k))} × {v}" for k, v in (both.get("ours") or {}).items())
            + "."
        )
    return f"<p>{text}</p>"


def _disagreements(metrics: Mapping[str, Any]) -> str:
    items = metrics.get("disagreements")
    if items is None:
        return ""
    note = _reference_note(metrics) + leaderboard_html(metrics.get("bfcl_leaderboard"))
    if not items:
        return _section("disagreements", "Disagreements with the reference checker", note + _empty("None."))
    keys: list[str] = []
    for item in items:
        for k in item if isinstance(item, Mapping) else ("note",):
            if k not in keys:
                keys.append(str(k))
    rows = []
    for item in items[:_MAX_ROWS]:
        data = item if isinstance(item, Mapping) else {"note": item}
        rows.append("<tr>" + "".join(f"<td>{escape(_plain(data.get(k)))}</td>" for k in keys) + "</tr>")
    table = _table(keys, rows, "disagreements-table")
    return _section("disagreements", "Disagreements with the reference checker", note + table)


def _plain(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)
