"""The bench report as Rich renderables: per-call table, targets, batch table, versions."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from actionspace.bench._discovery import render_discovery
from actionspace.bench._parallel_report import measured, render_parallel

__all__ = ["render"]

_KIND_ORDER = {"floor": 0, "actionspace": 1, "peer": 2}
_KIND_TITLE = {"floor": "floors", "actionspace": "actionspace", "peer": "peers"}


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _ratio(value: float | None, kind: str) -> Text:
    if value is None:
        return Text("-", style="dim")
    style = ""
    if kind == "peer":
        style = "green" if value <= 0.5 else ("yellow" if value <= 1.0 else "red")
    return Text(f"{value:.2f}×", style=style)


def _short(name: str | None) -> str:
    return "" if name is None else name.removeprefix("actionspace.")


def _sort_key(item: tuple[str, Any]) -> tuple[int, str]:
    name, kind = item
    return (_KIND_ORDER.get(kind, 3), name)


def _percall_table(result: dict[str, Any]) -> Table:
    table = Table(
        title="per-call overhead of add(a, b), µs (median of pass medians)",
        caption="ours ÷ row: the median of our row named in 'vs' over this row's median "
        "(below 1: actionspace is faster)",
        title_justify="left",
    )
    table.add_column("path", no_wrap=True)
    table.add_column("median", justify="right")
    table.add_column("p99", justify="right")
    table.add_column("n × passes", justify="right", style="dim")
    table.add_column("ours ÷ row", justify="right")
    table.add_column("vs", style="dim")
    percall: dict[str, Any] = result["percall"]
    last_kind = None
    for name, row in sorted(percall.items(), key=lambda item: _sort_key((item[0], item[1]["kind"]))):
        if last_kind is not None and row["kind"] != last_kind:
            table.add_section()
        last_kind = row["kind"]
        table.add_row(
            name,
            _us(row["median_us"]),
            _us(row["p99_us"]),
            f"{row['n_per_pass']:,} × {row['passes']}",
            _ratio(row["ratio"], row["kind"]),
            _short(row["reference"]),
        )
    return table


def _notes(result: dict[str, Any]) -> RenderableType:
    lines = [
        Text.assemble(("skipped ", "yellow"), (name, "bold"), f": {reason}")
        for name, reason in sorted(result["skipped"].items())
    ]
    for name, messages in sorted(result["errors"].items()):
        lines.append(Text.assemble(("error ", "bold red"), (name, "bold"), f": {messages[0][:300]}"))
        lines += [Text(f"      {m[:300]}", style="red") for m in messages[1:]]
    return Group(*lines)


def _targets(result: dict[str, Any]) -> RenderableType:
    lines = []
    for t in result["targets"]:
        status = t["status"]
        style = {"PASS": "bold green", "FAIL": "bold red"}.get(status, "yellow")
        line = Text.assemble((f"{status:<4}", style), f"  {t['label']}: ")
        if t["ratio"] is None:
            line.append(t.get("why", "not measured"))
        else:
            paired = t.get("paired")
            if paired is None:
                line.append(
                    f"{t['ours']} {t['ours_median_us']:.2f} µs = {t['ratio']:.2f} × fastest peer "
                    f"{t['peer']} {t['peer_median_us']:.2f} µs (target ≤ {t['limit']:.2f}×); "
                )
            else:
                line.append(
                    f"{t['ratio']:.2f} × fastest peer {t['peer']}, alternated in one process "
                    f"({paired['ours_us']:.2f} µs vs {paired['peer_us']:.2f} µs; target ≤ {t['limit']:.2f}×; "
                    f"in their own processes {t['ours_median_us']:.2f} vs {t['peer_median_us']:.2f} µs "
                    f"= {t['ratio_across_processes']:.2f}×); "
                )
            line.append(f"p99 = {t['p99_over_median']:.2f} × median (target ≤ {t['p99_limit']:g}×)")
        lines.append(line)
    for t in result.get("durable_targets", ()):
        status = t["status"]
        style = {"PASS": "bold green", "FAIL": "bold red"}.get(status, "yellow")
        lines.append(Text.assemble((f"{status:<4}", style), f"  {t['label']}: {t['detail']}"))
    overall = result["target"]
    style = {"PASS": "bold green", "FAIL": "bold red"}.get(overall, "yellow")
    head = Text.assemble(("target: ", "bold"), (overall, style), " — actionspace full pipeline median ≤ ")
    head.append(f"{result['targets'][0]['limit'] if result['targets'] else 0.5} × fastest peer median")
    return Group(head, *lines)


def _batch_table(result: dict[str, Any]) -> Table:
    config = result["config"]
    table = Table(
        title=f"parallel batch: {config['batch']} × sleep {config['slow_ms']:g} ms issued at once, ms",
        caption=f"ideal: {config['slow_ms']:g} ms; ours ÷ row: batch.actionspace.acall.gather over this row",
        title_justify="left",
    )
    table.add_column("path", no_wrap=True)
    table.add_column("median", justify="right")
    table.add_column("over ideal", justify="right")
    table.add_column("min", justify="right", style="dim")
    table.add_column("max", justify="right", style="dim")
    table.add_column("ours ÷ row", justify="right")
    batch: dict[str, Any] = result["batch"]
    for name, row in sorted(batch.items(), key=lambda item: _sort_key((item[0], item[1]["kind"]))):
        table.add_row(
            name,
            f"{row['median_ms']:.2f}",
            f"{row['overhead_ms']:+.2f}",
            f"{row['min_ms']:.2f}",
            f"{row['max_ms']:.2f}",
            _ratio(row["ratio"], row["kind"]),
        )
    return table


_LOOP_NAMES = {
    "once": "timed waits rounded up to the millisecond once (--loop once)",
    "stdlib": "asyncio's own epoll selector (--loop stdlib)",
}


def _footer(result: dict[str, Any]) -> RenderableType:
    m = result["machine"]
    cfg = result["config"]
    load = " → ".join(
        "/".join(f"{x:.2f}" for x in m[k])
        for k in ("loadavg_before", "loadavg_after")
        if m.get(k) is not None
    )
    runs = Text(
        f"{cfg['passes']} pass(es) × scale {cfg['scale']:g}"
        + (f", only {', '.join(cfg['only'])}" if cfg["only"] else "")
        + f" · event loop: {_LOOP_NAMES.get(cfg.get('loop', 'stdlib'), cfg.get('loop'))}"
        + f" · {result['elapsed_s']:.1f} s · {m['implementation']} {m['python']} on {m['platform']}, "
        f"{m['cpus']} CPUs · load average (1/5/15 min) {load}",
        style="dim",
    )
    shown = [f"{k} {v}" for k, v in result["versions"].items() if v is not None]
    missing = [k for k, v in result["versions"].items() if v is None]
    ver = Text("versions: " + " · ".join(shown), style="dim")
    if missing:
        ver.append(" · not installed: " + ", ".join(missing), style="dim")
    return Group(runs, ver)


def render(result: dict[str, Any]) -> RenderableType:
    """The whole report, ready for ``Console.print``."""
    parts: list[RenderableType] = [_percall_table(result), _targets(result), Text("")]
    if result["batch"]:
        parts += [_batch_table(result), Text("")]
    if measured(result.get("parallel")):
        parts += [render_parallel(result["parallel"]), Text("")]
    if result.get("discovery"):
        parts += [render_discovery(result["discovery"]), Text("")]
    if result["skipped"] or result["errors"]:
        parts += [_notes(result), Text("")]
    parts.append(_footer(result))
    return Group(*parts)
