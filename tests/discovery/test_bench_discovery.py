"""The discovery bench rows: a correct run on a small catalog, and the report built from its rows.

Nothing here is timed against a limit: the figures come from ``actionspace bench --only discovery``.
"""

from __future__ import annotations

from typing import Any

from actionspace.bench._discovery import (
    CASES,
    P95_LIMIT_MS,
    ROW,
    discovery_section,
    generate_catalog,
    measure_discovery,
)
from actionspace.bench._passes import GROUPS
from actionspace.bench._report import annotate
from actionspace.bench._timing import Pass


def test_the_generated_catalog_is_reproducible_and_varied() -> None:
    specs, availability = generate_catalog(500, seed=3)
    again, _ = generate_catalog(500, seed=3)
    assert [s.key for s in specs] == [s.key for s in again]
    assert len({s.name for s in specs}) == 500
    assert {s.effect for s in specs} == {"none", "read", "write", "external"}
    assert any(a.recovers for a in availability.values()) and any(a.phases for a in availability.values())


def test_a_small_measurement_reports_every_case_with_ordered_percentiles() -> None:
    row = measure_discovery(20, n=400)
    assert row["tools"] == 400
    for case in CASES:
        figures = row[case]
        assert figures["n"] == 20
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"] <= figures["max_ms"]
        assert 0 <= figures["cpu_p50_ms"] <= figures["cpu_p95_ms"]
    assert row["query_cold"]["mean_offered"] >= 20  # the limit, plus recovery tools after a conflict
    assert row["no_query_cold"]["mean_offered"] > row["query_cold"]["mean_offered"]


def _pass_rows(p95: float) -> dict[str, Any]:
    case = {
        "n": 10,
        "p50_ms": 0.5,
        "p95_ms": p95,
        "p99_ms": p95 + 1,
        "mean_offered": 20,
        "event_p50_ms": 3.0,
        "cpu_p50_ms": 0.4,
        "cpu_p95_ms": 0.9,
    }
    return {ROW: {"tools": 10_000, "limit": 20, "index_build_s": 0.5, **{c: dict(case) for c in CASES}}}


def test_the_section_takes_the_worst_pass_and_fails_above_the_limit() -> None:
    ok = discovery_section({"extra": [_pass_rows(1.0), _pass_rows(2.0)]})
    assert ok is not None and ok["status"] == "PASS"
    assert ok["cases"]["query_cold"]["p95_ms"] == 2.0
    bad = discovery_section({"extra": [_pass_rows(1.0), _pass_rows(P95_LIMIT_MS + 0.1)]})
    assert bad is not None and bad["status"] == "FAIL"
    assert discovery_section({"extra": [{}]}) is None


def test_only_discovery_selects_the_discovery_group_alone_and_the_report_carries_it() -> None:
    probe = Pass(1.0, ["discovery"])
    assert [g for g, prefixes in GROUPS.items() if probe.wants_any(*prefixes)] == ["discovery"]
    agg = {"percall": {}, "batch": {}, "errors": {}, "skipped": {}, "extra": [_pass_rows(1.0)]}
    report = annotate(agg)
    assert report["discovery"]["status"] == "PASS" and "extra" not in report
