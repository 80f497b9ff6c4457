"""Discovery rows: candidate selection over a generated 10,000-tool catalog, with permission filtering.

The catalog is made from a fixed seed: names and descriptions drawn from a 65-word vocabulary,
every effect, one tool in ten bound to task phases, one in twenty needing an environment
capability, one in a hundred a recovery tool. Each selection runs the whole filter chain of
:mod:`actionspace.discovery.candidates` — phase, capability, error state, BM25 ranking, permission
after ranking, rank cut — and builds the ``Selection``: the offered specs, best first, and a reason
code for every other tool. Three cases:

- ``query_cold``: a query, ``limit=20``, and a principal whose scope set was never seen, so the
  permission of all 10,000 tools is computed during the timed selection (the worst case);
- ``query_warm``: the same with one recurring principal (its permission mask is cached);
- ``no_query_cold``: no query (no ranking, no cut), a never-seen principal: every tool is filtered.

Target: wall-clock p95 ≤ 5 ms in every case. The selecting thread's CPU time is reported beside
it: on a loaded machine the wall clock also counts the time other processes held the CPU. The
index is built once per pass, before timing (its build time is reported beside: it is paid when
the catalog changes, not per offer). Turning a selection into the ``candidates_offered`` trace
payload ``Runtime.offer`` records (as for a run's first offer of the catalog: the full set of
10,000 keys and a packed reason per tool, see :mod:`actionspace.trace.offers`) is timed apart, on
every tenth selection, and reported beside the target.

A fourth figure, ``session_offer``, is what an agent loop pays each turn: a session over a runtime
holding the same catalog offers its tools (``Session.tools()`` with a query and the limit: the
selection, the run's pins, the ``candidates_offered`` event recorded in the memory trace store,
the definitions rendered for the provider), timed alternately with the selection alone of the
same request on the runtime's own index; with the bytes of JSON each offer adds to the trace after
the run's first (which records the catalog's full set once).
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from rich.console import Group, RenderableType
from rich.text import Text

from actionspace.bench._timing import Pass

__all__ = [
    "CASES",
    "P95_LIMIT_MS",
    "ROW",
    "TOOLS",
    "discovery_section",
    "generate_catalog",
    "measure_discovery",
    "render_discovery",
    "run_discovery_rows",
]

ROW: Final = "discovery.select"
"""The row's name (``--only discovery`` selects it)."""
TOOLS: Final = 10_000
"""Tools in the generated catalog."""
LIMIT: Final = 20
"""Rank cut of the query cases."""
P95_LIMIT_MS: Final = 5.0
"""Target: the 95th percentile of one selection, in milliseconds."""
CASES: Final = ("query_cold", "query_warm", "no_query_cold")
SEED: Final = 20_261_130

_VOCAB_TEXT: Final = (
    "account adjust approve archive attach audit balance book branch calendar cancel channel charge "
    "close comment commit config contact copy create customer deploy delete document draft email "
    "event export fetch file flight forecast hotel import invoice issue ledger list merge message "
    "meeting note order page payment post query record refund release report repo schedule search "
    "send share slack status summary ticket transfer update upload user vendor"
)
_VOCAB: Final = _VOCAB_TEXT.split()
_EFFECTS: Final = ("none", "read", "read", "write", "external")
_PHASES: Final = ("plan", "execute", "review")
_CAPABILITIES: Final = ("calendar", "repository", "payments", "mail")


def generate_catalog(n: int = TOOLS, seed: int = SEED) -> tuple[list[Any], dict[str, Any]]:
    """``n`` ToolSpecs (without implementations) and their availability, reproducible from ``seed``."""
    from actionspace.catalog.spec import ToolSpec
    from actionspace.discovery import Availability

    rng = random.Random(seed)
    specs: list[Any] = []
    availability: dict[str, Any] = {}
    for i in range(n):
        verb, noun, extra, other = rng.sample(_VOCAB, 4)
        name = f"{verb}_{noun}_{i}"
        args = {a: {"type": "string"} for a in (f"{noun}_id", extra, "limit")}
        specs.append(
            ToolSpec(
                name=name,
                description=f"{verb.capitalize()} a {noun} by {extra}; returns the {other} it touched.",
                input_schema={"type": "object", "properties": args},
                effect=rng.choice(_EFFECTS),
            )
        )
        if i % 10 == 3:
            availability[name] = Availability(phases=(rng.choice(_PHASES),))
        elif i % 20 == 7:
            availability[name] = Availability(requires=(rng.choice(_CAPABILITIES),))
        elif i % 100 == 11:
            availability[name] = Availability(recovers=("conflict",))
    return specs, availability


def _queries(rng: random.Random, k: int) -> list[str]:
    return [
        f"please {rng.choice(_VOCAB)} the {rng.choice(_VOCAB)} for {rng.choice(_VOCAB)}" for _ in range(k)
    ]


def _percentile(sorted_ms: Sequence[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, round(q * (len(sorted_ms) - 1)))]


def measure_discovery(selections: int, n: int = TOOLS) -> dict[str, Any]:
    """Time ``selections`` selections per case over a generated catalog of ``n`` tools.

    Returns ``tools``, ``index_build_s`` and per case ``p50_ms``, ``p95_ms``, ``p99_ms``,
    ``max_ms``, ``mean_offered``, ``n``. Raises AssertionError when a selection offers a tool the
    principal may not use (a figure from a wrong run is no figure).
    """
    from actionspace.discovery import CandidateIndex, request_of
    from actionspace.policy.principal import Principal

    specs, availability = generate_catalog(n)
    started = time.perf_counter()
    index = CandidateIndex(specs, availability=availability)
    index.ranker.warm()
    build_s = time.perf_counter() - started
    rng = random.Random(SEED + 1)
    queries = _queries(rng, 64)
    base = ("read:*", "none:*", "write:create_*", "write:update_*")
    warm = Principal(id="warm", scopes=base)
    out: dict[str, Any] = {"tools": n, "index_build_s": build_s, "limit": LIMIT}
    for case in CASES:
        times: list[float] = []
        cpu: list[float] = []
        events: list[float] = []
        offered = 0
        for i in range(selections):
            cold = case != "query_warm"
            who = Principal(id=f"p{i}", scopes=(*base, f"external:send_{case}_{i}_*")) if cold else warm
            request = request_of(
                who,
                query=None if case == "no_query_cold" else queries[i % len(queries)],
                limit=None if case == "no_query_cold" else LIMIT,
                phase=_PHASES[i % 3],
                capabilities=_CAPABILITIES[: 1 + i % 4],
                errors=("conflict",) if i % 5 == 0 else (),
            )
            gc.disable()
            c0 = time.thread_time_ns()
            t0 = time.perf_counter_ns()
            selection = index.select(request)
            elapsed = time.perf_counter_ns() - t0
            used = time.thread_time_ns() - c0
            gc.enable()
            times.append(elapsed / 1e6)
            cpu.append(used / 1e6)
            offered += len(selection.offered)
            if i % 10 == 0:  # the trace payload, built apart from the selection (informational)
                t0 = time.perf_counter_ns()
                selection.event()
                events.append((time.perf_counter_ns() - t0) / 1e6)
            for spec in selection.offered[:5]:
                if who.missing(spec.scopes or ()):
                    raise AssertionError(f"{spec.key} offered to {who.id} without its scopes")
        times.sort()
        cpu.sort()
        out[case] = {
            "n": selections,
            "p50_ms": statistics.median(times),
            "p95_ms": _percentile(times, 0.95),
            "p99_ms": _percentile(times, 0.99),
            "max_ms": times[-1],
            "mean_offered": offered / selections,
            "event_p50_ms": statistics.median(events),
            "cpu_p50_ms": statistics.median(cpu),
            "cpu_p95_ms": _percentile(cpu, 0.95),
        }
    out["session_offer"] = _session_offer(specs, availability, queries, max(50, selections // 4))
    return out


def _unused(**_: Any) -> None:
    """The catalog's tools are offered, never called."""


def _session_offer(
    specs: Sequence[Any], availability: Mapping[str, Any], queries: Sequence[str], turns: int
) -> dict[str, Any]:
    """One session offering its tools every turn, alternated with the bare selection (see module doc)."""
    import json

    from actionspace.discovery import request_of
    from actionspace.runtime import Runtime

    with Runtime("memory://") as rt:
        for spec in specs:
            rt.add_tool(
                name=spec.name,
                input_schema=spec.input_schema,
                fn=_unused,
                effect=spec.effect,
                description=spec.description,
            )
        for name, avail in availability.items():
            rt.discovery.annotate(name, phases=avail.phases, requires=avail.requires, recovers=avail.recovers)
        session = rt.session(provider="openai_chat", offer={"query": queries[0], "limit": LIMIT})
        session.user(queries[0])
        session.tools()  # builds the index; the run's first offer records the full set
        index = rt.discovery.index(rt.catalog)
        # the session names every tool of the catalog: the same selection as naming none
        request = request_of(rt.principal, query=queries[0], limit=LIMIT)
        offers: list[float] = []
        selects: list[float] = []
        gc.collect()
        for _ in range(turns):
            t0 = time.perf_counter_ns()
            session.tools()
            t1 = time.perf_counter_ns()
            index.select(request)
            t2 = time.perf_counter_ns()
            offers.append((t1 - t0) / 1e6)
            selects.append((t2 - t1) / 1e6)
        events = [e for e in rt.trace.events(session.run_id) if e.kind == "candidates_offered"]
        later = [len(json.dumps(e.data)) for e in events[1:]]
    offer_ms, select_ms = statistics.median(offers), statistics.median(selects)
    return {
        "turns": turns,
        "p50_ms": offer_ms,
        "select_p50_ms": select_ms,
        "over_select": offer_ms / select_ms,
        "first_event_bytes": len(json.dumps(events[0].data)),
        "event_bytes": statistics.median(later),
    }


def run_discovery_rows(p: Pass) -> None:
    """The discovery row of one pass."""
    if not p.want(ROW):
        return
    selections = max(100, int(400 * p.scale))
    try:
        row = measure_discovery(selections)
    except Exception as exc:
        p.fail(ROW, exc)
        return
    figures = ", ".join(f"{c} p95 {row[c]['p95_ms']:.2f} ms" for c in CASES)
    p.record(ROW, row, f"{TOOLS:,} tools: {figures}")


def discovery_section(agg: Mapping[str, Any]) -> dict[str, Any] | None:
    """Across passes: per case the median p50 and the worst p95 (the target is on the worst)."""
    rows = [p[ROW] for p in agg.get("extra", []) if ROW in p]
    if not rows:
        return None
    cases: dict[str, Any] = {}
    for case in CASES:
        per = [r[case] for r in rows]
        worst = max(x["p95_ms"] for x in per)
        cases[case] = {
            "p50_ms": statistics.median(x["p50_ms"] for x in per),
            "p95_ms": worst,
            "p99_ms": max(x["p99_ms"] for x in per),
            "pass_p95_ms": [round(x["p95_ms"], 3) for x in per],
            "mean_offered": statistics.median(x["mean_offered"] for x in per),
            "event_p50_ms": statistics.median(x["event_p50_ms"] for x in per),
            "cpu_p50_ms": statistics.median(x["cpu_p50_ms"] for x in per),
            "cpu_p95_ms": max(x["cpu_p95_ms"] for x in per),
            "selections_per_pass": per[0]["n"],
            "status": "PASS" if worst <= P95_LIMIT_MS else "FAIL",
        }
    states = {c["status"] for c in cases.values()}
    offers = [r["session_offer"] for r in rows if "session_offer" in r]
    session = (
        {k: statistics.median(o[k] for o in offers) for k in offers[0] if k != "turns"} if offers else None
    )
    return {
        "session_offer": session,
        "tools": rows[0]["tools"],
        "limit": rows[0]["limit"],
        "passes": len(rows),
        "index_build_s": statistics.median(r["index_build_s"] for r in rows),
        "p95_limit_ms": P95_LIMIT_MS,
        "cases": cases,
        "status": "FAIL" if "FAIL" in states else "PASS",
    }


def render_discovery(section: Mapping[str, Any]) -> RenderableType:
    """The section, ready for ``Console.print``."""
    style = "bold green" if section["status"] == "PASS" else "bold red"
    lines: list[RenderableType] = [
        Text.assemble(
            ("discovery: ", "bold"),
            f"candidate selection over {section['tools']:,} generated tools with permission filtering "
            f"(index built in {section['index_build_s']:.2f} s); "
            f"target p95 ≤ {section['p95_limit_ms']:g} ms: ",
            (section["status"], style),
        )
    ]
    for case, row in section["cases"].items():
        lines.append(
            Text(
                f"  {ROW}.{case}: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms (worst of "
                f"{section['passes']} pass(es)), p99 {row['p99_ms']:.2f} ms, "
                f"{row['mean_offered']:.0f} offered on average — {row['status']}; CPU time of the "
                f"selecting thread p50 {row['cpu_p50_ms']:.2f} ms, p95 {row['cpu_p95_ms']:.2f} ms; "
                f"building its candidates_offered event (a run's first, with the full set): "
                f"p50 {row['event_p50_ms']:.1f} ms"
            )
        )
    offer = section.get("session_offer")
    if offer:
        lines.append(
            Text(
                f"  {ROW}.session_offer: a session's offer each turn (selection, pins, event, definitions) "
                f"p50 {offer['p50_ms']:.2f} ms = {offer['over_select']:.2f} × the selection alone "
                f"({offer['select_p50_ms']:.2f} ms); {offer['event_bytes']:,.0f} bytes of trace per offer "
                f"after the run's first ({offer['first_event_bytes']:,.0f} bytes, the full set)"
            )
        )
    return Group(*lines)
