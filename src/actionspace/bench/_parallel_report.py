"""The report's "parallel" section: the plan rows against their floors, the peers and the targets.

Targets (each PASS, FAIL, or n/a when its rows were not measured):

- the 100-node plan on the in-memory store within ``GATHER_LIMIT`` × plain ``asyncio.gather`` of
  the same coroutines in the same run, timed alternately with the plan's batches when that row
  (``GATHER_BESIDE_ROW``) was measured, else the ``asyncio_gather`` floor timed apart (the 10 ms
  ideal is below what asyncio itself reaches on a loaded machine; the SQLite row, the ratio to
  the ideal and to the floor timed apart are shown beside it);
- the 100-node plan on the in-memory store below every peer's parallel batch (peers keep nothing
  durable, so the memory row is the like-for-like one);
- the random DAG's makespan within ``DAG_LIMIT`` × the makespan of bare asyncio tasks on the same
  DAG, and its scheduling cost with zero-latency tools within ``SCHEDULING_LIMIT`` × theirs;
- trimming 1 GiB with ``log-v1`` growing the resident set by at most 64 MiB.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from actionspace.bench._parallel import DAG_ROW, GATHER_BESIDE_ROW, PLAN_ROWS, medians
from actionspace.bench._trimming import ROW as TRIM_ROW
from actionspace.bench._trimming import summarize_trim
from actionspace.bench._workload import BATCH, SLOW_S

__all__ = [
    "DAG_LIMIT",
    "FLOOR_ROW",
    "GATHER_LIMIT",
    "IDEAL_LIMIT",
    "PEER_GROUPS",
    "SCHEDULING_LIMIT",
    "measured",
    "parallel_section",
    "render_parallel",
]

IDEAL_LIMIT: Final = 1.2
"""Shown beside the targets: the 100-node plan's wall time over the 10 ms ideal."""
GATHER_LIMIT: Final = 1.10
"""The 100-node plan (memory store) must take at most this multiple of plain ``asyncio.gather``."""
DAG_LIMIT: Final = 1.03
"""The DAG's makespan must be at most this multiple of bare asyncio tasks' on the same DAG."""
SCHEDULING_LIMIT: Final = 2.0
"""Scheduling cost per node (zero-latency tools) at most this multiple of bare asyncio tasks'."""
FLOOR_ROW: Final = "batch.direct.asyncio_gather"
"""``asyncio.gather`` of the raw coroutines: the floor of any parallel batch."""
PEER_GROUPS: Final = ("mcp", "pydantic_ai", "langgraph", "openai_agents")

_STYLE: Final = {"PASS": "bold green", "FAIL": "bold red"}


def _status(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _peer_gaps(
    peers: Mapping[str, float], skipped: Mapping[str, str], errors: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """Peer group → why it has no parallel row here."""
    gaps: dict[str, str] = {}
    for group in PEER_GROUPS:
        if any(name.removeprefix("batch.").startswith(f"{group}.") for name in peers):
            continue
        reasons = [r for k, r in skipped.items() if k.startswith(group)]
        reasons += [m[0] for k, m in errors.items() if k.removeprefix("batch.").startswith(group)]
        gaps[group] = reasons[0] if reasons else "not measured in this run"
    return gaps


def _plan_rows(batch: Mapping[str, Any], floor: float | None, peers: Mapping[str, float]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    ideal = SLOW_S * 1e3
    beside = batch.get(GATHER_BESIDE_ROW, {}).get("median_ms")
    for name in PLAN_ROWS:
        if name not in batch:
            continue
        ms = batch[name]["median_ms"]
        rows[name] = {
            "median_ms": ms,
            "over_ideal": ms / ideal,
            "over_floor": ms / floor if floor else None,
            "over_peers": {peer: ms / theirs for peer, theirs in peers.items()},
        }
        if name == PLAN_ROWS[0] and beside:
            rows[name]["gather_beside_ms"] = beside
            rows[name]["over_gather_beside"] = ms / beside
    return rows


def _targets(section: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    plans = section["plan"]
    name = PLAN_ROWS[0]
    label = f"{BATCH}-node plan (memory store) ≤ {GATHER_LIMIT}× plain asyncio.gather"
    row = plans.get(name)
    if row is not None and "over_gather_beside" in row:
        apart = "" if row["over_floor"] is None else f"; {row['over_floor']:.2f} × the gather row timed apart"
        out.append(
            {
                "label": label,
                "status": _status(row["over_gather_beside"] <= GATHER_LIMIT),
                "detail": f"{row['median_ms']:.2f} ms = {row['over_gather_beside']:.2f} × gather timed "
                f"beside it ({row['gather_beside_ms']:.2f} ms{apart}; "
                f"{row['over_ideal']:.2f} × the {SLOW_S * 1e3:g} ms ideal)",
            }
        )
    elif row is None or row["over_floor"] is None:
        why = f"no {name} row" if row is None else f"no {FLOOR_ROW} row"
        out.append({"label": label, "status": "n/a", "detail": why})
    else:
        out.append(
            {
                "label": label,
                "status": _status(row["over_floor"] <= GATHER_LIMIT),
                "detail": f"{row['median_ms']:.2f} ms = {row['over_floor']:.2f} × gather "
                f"({row['over_ideal']:.2f} × the {SLOW_S * 1e3:g} ms ideal)",
            }
        )
    label = f"{BATCH}-node plan (memory store) below every peer's parallel batch"
    mine = plans.get(PLAN_ROWS[0])
    if mine is None or not mine["over_peers"]:
        why = "no peer parallel row" if mine is not None else f"no {PLAN_ROWS[0]} row"
        out.append({"label": label, "status": "n/a", "detail": why})
    else:
        worst = max(mine["over_peers"], key=lambda n: mine["over_peers"][n])
        ratio = mine["over_peers"][worst]
        out.append(
            {
                "label": label,
                "status": _status(ratio < 1.0),
                "detail": f"highest ours ÷ peer is {ratio:.2f}× against {worst.removeprefix('batch.')}",
            }
        )
    dag = section["dag"]
    label = f"{DAG_ROW}: makespan ≤ {DAG_LIMIT}× bare asyncio tasks"
    sched = f"{DAG_ROW}: scheduling per node ≤ {SCHEDULING_LIMIT:g}× bare asyncio tasks"
    if dag is None:
        out.append({"label": label, "status": "n/a", "detail": f"no {DAG_ROW} row"})
        out.append({"label": sched, "status": "n/a", "detail": f"no {DAG_ROW} row"})
    else:
        detail = (
            f"{dag['makespan_ms']:.1f} ms = {dag['over_floor']:.3f}× tasks' {dag['floor_ms']:.1f} ms "
            f"({dag['over_critical_path']:.3f}× critical path)"
        )
        out.append({"label": label, "status": dag["status"], "detail": detail})
        detail = (
            f"{dag['zero_latency_us_per_node']:.1f} µs/node = {dag['scheduling_over_floor']:.2f}× "
            f"tasks' {dag['zero_floor_us_per_node']:.1f} µs/node (a plan object run again keeps its "
            f"check; one built anew each run: {dag['zero_latency_fresh_us_per_node']:.1f} µs/node = "
            f"{dag['fresh_over_floor']:.2f}×)"
        )
        out.append({"label": sched, "status": dag["scheduling_status"], "detail": detail})
    trim = section["trim"]
    label = "log-v1 over a generated log: RSS growth ≤ 64 MiB"
    if trim is None:
        out.append({"label": label, "status": "n/a", "detail": f"no {TRIM_ROW} row"})
    else:
        detail = f"+{trim['peak_rss_growth_mib']:.1f} MiB over {trim['bytes'] / (1 << 20):,.0f} MiB"
        out.append({"label": label, "status": trim["status"], "detail": detail})
    return out


def parallel_section(agg: Mapping[str, Any]) -> dict[str, Any]:
    """The section's figures from the aggregated rows (``agg["extra"]``: the per-pass extra rows)."""
    batch: Mapping[str, Any] = agg.get("batch", {})
    extra: Sequence[Mapping[str, Any]] = agg.get("extra", [])
    floor = batch.get(FLOOR_ROW, {}).get("median_ms")
    peers = {
        name: row["median_ms"]
        for name, row in batch.items()
        if name.removeprefix("batch.").split(".", 1)[0] in PEER_GROUPS
    }
    dag_rows = [p[DAG_ROW] for p in extra if DAG_ROW in p]
    dag = medians(dag_rows) if dag_rows else None
    if dag is not None:
        dag["over_critical_path"] = dag["makespan_ms"] / dag["critical_path_ms"]
        dag["floor_over_critical_path"] = dag["floor_ms"] / dag["critical_path_ms"]
        dag["over_floor"] = dag["makespan_ms"] / dag["floor_ms"]
        dag["limit"] = DAG_LIMIT
        dag["status"] = _status(dag["over_floor"] <= DAG_LIMIT)
        dag["scheduling_over_floor"] = dag["zero_latency_us_per_node"] / dag["zero_floor_us_per_node"]
        dag["scheduling_limit"] = SCHEDULING_LIMIT
        dag["fresh_over_floor"] = dag["zero_latency_fresh_us_per_node"] / dag["zero_floor_us_per_node"]
        dag["scheduling_status"] = _status(dag["scheduling_over_floor"] <= SCHEDULING_LIMIT)
    section: dict[str, Any] = {
        "ideal_ms": SLOW_S * 1e3,
        "floor": {"row": FLOOR_ROW, "median_ms": floor},
        "plan": _plan_rows(batch, floor, peers),
        "peers": peers,
        "peers_without_parallel_row": _peer_gaps(peers, agg.get("skipped", {}), agg.get("errors", {})),
        "dag": dag,
        "trim": summarize_trim([p[TRIM_ROW] for p in extra if TRIM_ROW in p]),
    }
    section["targets"] = _targets(section)
    states = {t["status"] for t in section["targets"]}
    section["status"] = "FAIL" if "FAIL" in states else ("PASS" if "PASS" in states else "n/a")
    return section


def measured(section: Mapping[str, Any] | None) -> bool:
    """Whether the section has any figure to show."""
    return bool(section and (section["plan"] or section["dag"] or section["trim"]))


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def _batch_table(section: Mapping[str, Any]) -> Table:
    table = Table(
        title=f"parallel: {BATCH} × sleep {section['ideal_ms']:g} ms as one Plan of {BATCH} nodes "
        f"(rt.arun_plan, full pipeline), ms",
        caption="÷ ideal: over 10 ms · ÷ gather: over asyncio.gather of the raw coroutines · "
        "plan ÷ peer: our memory-store row (then SQLite) over the peer's batch (below 1: ours is faster)",
        title_justify="left",
    )
    table.add_column("path", no_wrap=True)
    table.add_column("median", justify="right")
    table.add_column("÷ ideal", justify="right")
    table.add_column("÷ gather", justify="right")
    table.add_column("plan ÷ peer", justify="right")
    floor = section["floor"]["median_ms"]
    ideal = section["ideal_ms"]
    if floor is not None:
        table.add_row(FLOOR_ROW, f"{floor:.2f}", _x(floor / ideal), "1.00×", "")
    for name, row in section["plan"].items():
        table.add_row(name, f"{row['median_ms']:.2f}", _x(row["over_ideal"]), _x(row["over_floor"]), "")
    mine = [row["over_peers"] for row in section["plan"].values()]
    for name, ms in sorted(section["peers"].items()):
        ratios = " / ".join(_x(r.get(name)) for r in mine)
        style = "green" if mine and mine[0].get(name, 2.0) < 1.0 else "red"
        table.add_row(
            name, f"{ms:.2f}", _x(ms / ideal), _x(ms / floor) if floor else "-", Text(ratios, style)
        )
    return table


def _dag_lines(dag: Mapping[str, Any]) -> list[Text]:
    return [
        Text(
            f"{DAG_ROW}: {dag['nodes']} nodes, {dag['edges']} edges (≤ {dag['fan_in']} parents, seed "
            f"{dag['seed']}), {dag['depth']} levels, sleeps 1–20 ms; "
            f"critical path {dag['critical_path_ms']} ms"
        ),
        Text(
            f"  makespan {dag['makespan_ms']:.1f} ms = {dag['over_critical_path']:.3f} × critical path "
            f"(plain asyncio tasks: {dag['floor_ms']:.1f} ms = {dag['floor_over_critical_path']:.3f}×); "
            f"median of {dag['reps']} runs × {dag['passes']} pass(es)"
        ),
        Text(
            f"  scheduling cost, zero-latency tools: {dag['zero_latency_us_per_node']:.1f} µs/node "
            f"(plain asyncio tasks: {dag['zero_floor_us_per_node']:.1f} µs/node; the same plan built "
            f"anew each run, so checked anew: {dag['zero_latency_fresh_us_per_node']:.1f} µs/node)"
        ),
    ]


def _trim_lines(trim: Mapping[str, Any]) -> list[Text]:
    return [
        Text(
            f"{TRIM_ROW}: {trim['bytes'] / (1 << 20):,.0f} MiB generated log, {trim['total_lines']:,} lines, "
            f"traceback at line {trim['first_error_line']:,}: {trim['mib_per_s']:.1f} MiB/s (median), "
            f"RSS growth {trim['peak_rss_growth_mib']:.1f} MiB (largest of {trim['passes']} pass(es); "
            f"{trim['rss_method']})"
        )
    ]


def render_parallel(section: Mapping[str, Any]) -> RenderableType:
    """The section, ready for ``Console.print``."""
    parts: list[RenderableType] = []
    if section["plan"] or section["peers"]:
        parts.append(_batch_table(section))
        for group, why in section["peers_without_parallel_row"].items():
            parts.append(Text.assemble(("no parallel row ", "yellow"), (group, "bold"), f": {why}"))
    if section["dag"] is not None:
        parts += _dag_lines(section["dag"])
    if section["trim"] is not None:
        parts += _trim_lines(section["trim"])
    overall = section["status"]
    parts.append(Text.assemble(("parallel targets: ", "bold"), (overall, _STYLE.get(overall, "yellow"))))
    for t in section["targets"]:
        style = _STYLE.get(t["status"], "yellow")
        parts.append(Text.assemble((f"{t['status']:<4}", style), f"  {t['label']}: {t['detail']}"))
    return Group(*parts)
