"""Turn aggregated rows into the report: who each row is, which of our rows it is compared with, targets."""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from actionspace.bench._discovery import discovery_section
from actionspace.bench._durable import BESIDE_ROW, CALLERS, FLOOR_ROW, GROUP_ROW, OUR_ROW
from actionspace.bench._paired import PAIRED_ROW
from actionspace.bench._parallel_report import parallel_section

__all__ = [
    "BATCH_OURS",
    "DURABLE_GROUP_LIMIT",
    "DURABLE_ONE_LIMIT",
    "P99_LIMIT",
    "PACKAGES",
    "TARGETS",
    "TARGET_RATIO",
    "annotate",
    "durable_targets",
    "machine",
    "paired_summary",
    "versions",
]

TARGET_RATIO = 0.5
"""Our full pipeline's median must be at most this fraction of the fastest peer's median."""

P99_LIMIT = 3.0
"""And its p99 at most this multiple of its own median (no tail hidden behind a fast median)."""

DURABLE_ONE_LIMIT = 0.5
"""One caller at a time, a durable write call must reach this fraction of the raw commit rate."""

DURABLE_GROUP_LIMIT = 3.0
"""With ``DURABLE_CALLERS`` concurrent callers, the call rate must be this multiple of one caller's."""

TARGETS: tuple[tuple[str, str, str], ...] = (
    ("async tool", "actionspace.acall.async_tool", "async"),
    ("sync tool, awaited", "actionspace.acall.sync_tool", "sync"),
)
"""(label, our row, the peer variant it is held against). Every peer awaits its sync tools on a
worker thread, so our sync-tool target uses ``rt.acall`` too, not the thread-free ``rt.call``."""

BATCH_OURS = "batch.actionspace.acall.gather"

PACKAGES = (
    "actionspace",
    "pydantic",
    "pydantic-core",
    "jsonschema-rs",
    "rfc8785",
    "mcp",
    "mcp-types",
    "pydantic-ai-slim",
    "pydantic-graph",
    "langgraph",
    "langgraph-prebuilt",
    "langchain-core",
    "openai-agents",
    "openai",
    "anyio",
    "jsonschema",
    "opentelemetry-api",
    "langsmith",
    "typer",
    "rich",
)
"""Packages whose versions the report prints (None when not installed)."""

_FLOOR_PREFIXES = ("direct.", "pydantic_validate.", "json_parse.", "sqlite_commit.")

_FLOOR_REFERENCE = {
    "direct.sync_tool": "actionspace.call.sync_tool",
    "direct.sync_tool_to_thread": "actionspace.acall.sync_tool",
    "direct.async_tool": "actionspace.acall.async_tool",
    "sqlite_commit.insert_per_transaction": "actionspace.call.durable_write_sqlite",
}


def kind_of(name: str) -> str:
    """``floor``, ``actionspace`` or ``peer``."""
    bare = name.removeprefix("batch.")
    if bare.startswith(_FLOOR_PREFIXES) or bare.endswith(".gather_beside"):
        return "floor"
    if bare.startswith(("actionspace.", "plan.")):
        return "actionspace"
    return "peer"


def variant_of(name: str) -> str | None:
    """``async`` (an async tool), ``sync`` (a sync tool) or None (no tool call: parse or validation only)."""
    if ".async_tool" in name or name.endswith(".toolcall"):
        return "async"
    if ".sync_tool" in name:
        return "sync"
    return None


def reference_of(name: str) -> str | None:
    """Which of our rows a row's ratio is taken against (None for our own rows)."""
    kind = kind_of(name)
    if kind == "actionspace":
        return None
    if kind == "floor":
        return _FLOOR_REFERENCE.get(name, "actionspace.call.sync_tool")
    return "actionspace.acall.async_tool" if variant_of(name) == "async" else "actionspace.acall.sync_tool"


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or not theirs:
        return None
    return ours / theirs


def annotate(agg: dict[str, Any]) -> dict[str, Any]:
    """Add kind, variant, reference and ratio to every row, the batch ratios, the targets, and the
    ``parallel`` section (which replaces the per-pass ``extra`` rows)."""
    percall = agg["percall"]
    for name, row in percall.items():
        ref = reference_of(name)
        row["kind"] = kind_of(name)
        row["variant"] = variant_of(name)
        row["reference"] = ref
        row["ratio"] = _ratio(percall.get(ref, {}).get("median_us") if ref else None, row["median_us"])
    ours_batch = agg["batch"].get(BATCH_OURS, {}).get("median_ms")
    for name, row in agg["batch"].items():
        row["kind"] = kind_of(name)
        row["ratio"] = None if row["kind"] == "actionspace" else _ratio(ours_batch, row["median_ms"])
    paired = paired_summary(agg.get("extra", []))
    targets = [_target(percall, label, ours, variant, paired) for label, ours, variant in TARGETS]
    agg["targets"] = targets
    agg["durable_targets"] = durable_targets(percall)
    states = {t["status"] for t in targets}
    agg["target"] = "FAIL" if "FAIL" in states else ("PASS" if states == {"PASS"} else "n/a")
    agg["parallel"] = parallel_section(agg)
    agg["discovery"] = discovery_section(agg)
    agg.pop("extra", None)
    return agg


def paired_summary(extra: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``paired.acall`` rows of the passes (:mod:`actionspace.bench._paired`): the median of
    each figure across passes, and each pass's ratio; None when no pass measured it."""
    rows = [p[PAIRED_ROW] for p in extra if PAIRED_ROW in p]
    if not rows:
        return None
    out: dict[str, Any] = {"peer": rows[0]["peer"], "passes": len(rows)}
    for key in ("ours_us", "peer_us", "ratio", "ratio_q1", "ratio_q3"):
        out[key] = statistics.median(r[key] for r in rows)
    out["pass_ratios"] = [round(r["ratio"], 3) for r in rows]
    return out


def _target(
    percall: dict[str, Any], label: str, ours: str, variant: str, paired: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The row ``ours`` against the fastest peer's row of ``variant``. When that peer is the one
    :mod:`actionspace.bench._paired` alternates with ours in one process (``paired``), the
    ratio is the paired one; the ratio of the two rows' own processes is kept beside it."""
    peers = {n: r["median_us"] for n, r in percall.items() if r["kind"] == "peer" and r["variant"] == variant}
    out: dict[str, Any] = {"label": label, "ours": ours, "limit": TARGET_RATIO, "peer": None, "ratio": None}
    mine = percall.get(ours, {}).get("median_us")
    if mine is None or not peers:
        out["status"] = "n/a"
        out["why"] = f"no {ours} row" if mine is None else f"no peer row with the {variant} tool variant"
        return out
    fastest = min(peers, key=lambda n: peers[n])
    ratio = mine / peers[fastest]
    if paired is not None and paired["peer"] == fastest:
        out.update(ratio_across_processes=ratio, paired=paired)
        ratio = paired["ratio"]
    tail = percall[ours]["p99_us"] / mine
    out.update(
        peer=fastest,
        ours_median_us=mine,
        peer_median_us=peers[fastest],
        ratio=ratio,
        p99_over_median=tail,
        p99_limit=P99_LIMIT,
        status="PASS" if ratio <= TARGET_RATIO and tail <= P99_LIMIT else "FAIL",
    )
    return out


def durable_targets(percall: dict[str, Any]) -> list[dict[str, Any]]:
    """The SQLite durable-write targets: one caller against the raw commit, and group commit."""
    # the raw insert timed alternately with our calls when there is one (the disk's latency drifts)
    raw_row = percall.get(BESIDE_ROW, percall.get(FLOOR_ROW, {}))
    raw, one = raw_row.get("median_us"), percall.get(OUR_ROW, {}).get("median_us")
    group = percall.get(GROUP_ROW, {}).get("median_us")
    label = f"durable write, one caller ≥ {DURABLE_ONE_LIMIT:.0%} of the raw fsync'd insert rate"
    out: list[dict[str, Any]] = []
    if raw is None or one is None:
        out.append({"label": label, "status": "n/a", "detail": f"no {FLOOR_ROW} or {OUR_ROW} row"})
    else:
        share = raw / one
        ours_cpu = _cpu(percall[OUR_ROW], "on its thread")
        raw_cpu = _cpu(raw_row, "")
        detail = (
            f"{one:,.0f} µs per call{ours_cpu} vs {raw:,.0f} µs per raw insert{raw_cpu}"
            f" = {share:.0%} of the raw rate"
        )
        out.append(
            {"label": label, "status": "PASS" if share >= DURABLE_ONE_LIMIT else "FAIL", "detail": detail}
        )
    label = f"durable write, {CALLERS} concurrent callers ≥ {DURABLE_GROUP_LIMIT:g} × the one-caller rate"
    if one is None or group is None:
        out.append({"label": label, "status": "n/a", "detail": f"no {OUR_ROW} or {GROUP_ROW} row"})
    else:
        gain = one / group
        row = percall[GROUP_ROW]
        busy = ""
        if "cores_busy" in row and "cpu_us" in row:
            cores = os.cpu_count() or 1
            busy = f" ({row['cores_busy']:.2f} of {cores} cores busy, {row['cpu_us']:,.0f} µs of CPU a call)"
        detail = f"{group:,.0f} µs per call with {CALLERS} callers{busy} vs {one:,.0f} µs alone = {gain:.2f}×"
        status = "PASS" if gain >= DURABLE_GROUP_LIMIT else "FAIL"
        out.append({"label": label, "status": status, "detail": detail})
    return out


def _cpu(row: Mapping[str, Any], where: str) -> str:
    """`` (N µs of CPU …)`` when ``row`` measured its CPU time, else nothing."""
    if "cpu_us" not in row:
        return ""
    return f" ({row['cpu_us']:,.0f} µs of CPU{' ' + where if where else ''})"


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    found["python"] = platform.python_version()
    return found


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
