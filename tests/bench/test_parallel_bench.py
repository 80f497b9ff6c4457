"""The parallel and trimming rows of the bench: what they build, run and compute, never timing."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from actionspace.bench import SECTIONS, render, run_bench
from actionspace.bench._parallel import (
    DAG_ROW,
    GATHER_BESIDE_ROW,
    PLAN_ROWS,
    RandomDag,
    _runtime,
    asyncio_dag,
    batch_plan,
    critical_path_ms,
    dag_plan,
    random_dag,
    run_plan_rows,
)
from actionspace.bench._parallel_report import parallel_section
from actionspace.bench._report import annotate, kind_of
from actionspace.bench._timing import Pass, time_batches
from actionspace.bench._trimming import (
    CHUNK_BYTES,
    MIN_LOG_BYTES,
    ROW,
    TRACEBACK,
    log_bytes,
    log_chunks,
    measure_trim,
)
from actionspace.bench._workload import BATCH
from actionspace.observation import shape

DIAMOND = RandomDag(latency_ms=(5, 1, 10, 2), parents=((), (0,), (0,), (1, 2)))
"""0 → 1 → 3 weighs 8 ms, 0 → 2 → 3 weighs 17 ms."""


def test_the_critical_path_is_the_heaviest_path_not_the_longest_chain() -> None:
    assert critical_path_ms(DIAMOND) == 17
    lone_heavy_node = RandomDag(latency_ms=(1, 1, 1, 50), parents=((), (0,), (1,), ()))
    assert critical_path_ms(lone_heavy_node) == 50
    assert lone_heavy_node.depth() == 3
    assert DIAMOND.depth() == 3 and DIAMOND.edges == 4
    assert critical_path_ms(RandomDag(latency_ms=(), parents=())) == 0


def test_a_random_dag_is_seeded_acyclic_and_within_its_bounds() -> None:
    dag = random_dag(300, seed=7, fan_in=3, latency_ms=(1, 20))
    assert dag == random_dag(300, seed=7, fan_in=3, latency_ms=(1, 20))
    assert dag != random_dag(300, seed=8, fan_in=3, latency_ms=(1, 20))
    assert len(dag.parents) == len(dag.latency_ms) == 300
    for j, parents in enumerate(dag.parents):
        assert len(parents) <= 3 and len(set(parents)) == len(parents)
        assert all(0 <= p < j for p in parents)
    assert all(1 <= ms <= 20 for ms in dag.latency_ms)
    assert dag.edges > 300  # about 1.5 parents a node: a DAG, not a forest of singletons


def test_the_dag_plan_mirrors_the_dag_and_allows_every_node_at_once() -> None:
    plan = dag_plan(DIAMOND)
    assert [n.id for n in plan.nodes] == ["n0", "n1", "n2", "n3"]
    assert [n.depends_on for n in plan.nodes] == [(), ("n0",), ("n0",), ("n1", "n2")]
    assert [n.arguments for n in plan.nodes] == [{"ms": 5}, {"ms": 1}, {"ms": 10}, {"ms": 2}]
    assert plan.max_concurrency == 4
    assert {n.arguments["ms"] for n in dag_plan(DIAMOND, zero=True).nodes} == {0}


def test_the_asyncio_twin_runs_every_node_after_its_parents() -> None:
    import asyncio

    assert asyncio.run(asyncio_dag(DIAMOND, zero=True)) == [0, 0, 0, 0]
    assert asyncio.run(asyncio_dag(DIAMOND)) == [5, 1, 10, 2]


def test_all_100_nodes_of_the_batch_plan_run_and_return_their_argument() -> None:
    with _runtime("memory://") as rt:
        result = rt.run_plan(batch_plan())
    assert result.status == "ok"
    assert len(result.nodes) == 100
    assert {k: o.data for k, o in result.nodes.items()} == {f"n{i}": i for i in range(100)}
    assert result.stats["max_parallel"] == 100


def test_the_plan_rows_measure_both_stores_and_the_dag() -> None:
    lines: list[str] = []
    p = Pass(0.01, [], log=lines.append)
    run_plan_rows(p)
    assert p.errors == {} and p.skipped == {}
    assert set(p.batch) == {*PLAN_ROWS, GATHER_BESIDE_ROW}
    assert all(row["reps"] >= 5 for row in p.batch.values())
    dag = p.extra[DAG_ROW]
    assert dag["nodes"] == 1000 and dag["critical_path_ms"] == critical_path_ms(random_dag())
    assert dag["edges"] == random_dag().edges and dag["reps"] >= 2
    assert dag["makespan_ms"] > 0 and dag["zero_latency_us_per_node"] > 0
    assert any(line.startswith(f"[{DAG_ROW}]") for line in lines)


def test_the_plan_rows_follow_the_only_filter() -> None:
    p = Pass(0.01, ["batch.plan.arun_plan.memory"], log=lambda _line: None)
    run_plan_rows(p)
    assert set(p.batch) == {PLAN_ROWS[0], GATHER_BESIDE_ROW} and p.extra == {}
    nothing = Pass(0.01, ["direct"], log=lambda _line: None)
    run_plan_rows(nothing)
    assert nothing.batch == {} and nothing.extra == {}


@pytest.mark.parametrize("total", [0, 1, 100, len(TRACEBACK), 3 * CHUNK_BYTES + 17, 5_000_000])
def test_the_log_generator_yields_exactly_the_bytes_asked_for(total: int) -> None:
    chunks = log_chunks(total)
    assert isinstance(chunks, Iterator)
    sizes = [len(c) for c in chunks]
    assert sum(sizes) == total
    assert max(sizes, default=0) <= CHUNK_BYTES + 200  # made a chunk at a time, never whole


def test_the_traceback_starts_a_line_halfway_through_the_log() -> None:
    data = b"".join(log_chunks(5_000_000))
    at = data.find(TRACEBACK)
    assert data.count(TRACEBACK) == 1
    assert data[at - 1 : at] == b"\n"
    assert 2_499_800 < at <= 2_500_000


def test_the_generated_log_has_no_error_line_but_the_traceback() -> None:
    quiet = shape(log_chunks(2_000_000, error_at=2.0), rule="log-v1")
    assert quiet.data["first_error_line"] is None


def test_measuring_the_trim_sees_every_byte_and_the_traceback() -> None:
    total = 4 * CHUNK_BYTES + 5
    data = b"".join(log_chunks(total))
    row = measure_trim(total)
    assert row["bytes"] == total and row["seconds"] > 0
    assert row["total_lines"] == data.count(b"\n") + 1  # the last line is cut mid-way
    assert row["first_error_line"] == data[: data.find(TRACEBACK)].count(b"\n") + 1
    assert row["peak_rss_growth_bytes"] >= 0 and row["kept_bytes"] <= 16_384


def test_the_log_is_scale_gibibytes_and_never_below_64_mebibytes() -> None:
    assert log_bytes(1.0) == 1 << 30
    assert log_bytes(0.05) == MIN_LOG_BYTES == 64 << 20
    assert log_bytes(2.0) == 2 << 30


def _agg(peers: dict[str, float], *, makespan: float, growth: int) -> dict[str, Any]:
    batch = {
        "batch.direct.asyncio_gather": {"median_ms": 10.5},
        PLAN_ROWS[0]: {"median_ms": 11.0},
        PLAN_ROWS[1]: {"median_ms": 13.0},
        **{f"batch.{name}": {"median_ms": ms} for name, ms in peers.items()},
    }
    dag = {
        "nodes": 1000,
        "edges": 1500,
        "depth": 15,
        "seed": 1,
        "fan_in": 3,
        "reps": 5,
        "critical_path_ms": 200,
        "makespan_ms": makespan,
        "floor_ms": 205.0,
        "zero_latency_us_per_node": 15.0,
        "zero_floor_us_per_node": 10.0,
        "zero_latency_fresh_us_per_node": 26.0,
    }
    trim = {
        "bytes": 1 << 30,
        "seconds": 10.0,
        "mib_per_s": 102.4,
        "peak_rss_growth_bytes": growth,
        "rss_method": "statm",
        "total_lines": 9,
        "first_error_line": 5,
        "kept_bytes": 100,
    }
    return {
        "percall": {},
        "batch": batch,
        "skipped": {"openai_agents": "not installed"},
        "errors": {},
        "extra": [{DAG_ROW: dag, ROW: trim}, {DAG_ROW: {**dag, "makespan_ms": makespan + 2}}],
    }


def test_the_section_holds_each_figure_against_its_target() -> None:
    peers = {"mcp.inproc_direct.gather_call_tool": 22.0, "langgraph.toolnode.ainvoke.100_tool_calls": 44.0}
    result = annotate(_agg(peers, makespan=209.0, growth=5 << 20))
    section = result["parallel"]
    assert "extra" not in result
    by_label = {t["label"]: t["status"] for t in section["targets"]}
    assert list(by_label.values()) == ["PASS", "PASS", "PASS", "PASS", "PASS"]
    assert section["status"] == "PASS"
    sched = next(t for t in section["targets"] if "scheduling per node" in t["label"])
    assert "one built anew each run: 26.0 µs/node = 2.60×" in sched["detail"]  # shown beside the row
    memory = section["plan"][PLAN_ROWS[0]]
    assert memory["over_ideal"] == pytest.approx(1.1)
    assert memory["over_floor"] == pytest.approx(11.0 / 10.5)
    assert memory["over_peers"]["batch.mcp.inproc_direct.gather_call_tool"] == pytest.approx(0.5)
    assert section["dag"]["makespan_ms"] == pytest.approx(210.0)  # the median of the two passes
    assert section["dag"]["over_critical_path"] == pytest.approx(1.05)
    assert section["dag"]["over_floor"] == pytest.approx(210.0 / 205.0)
    assert section["dag"]["scheduling_over_floor"] == pytest.approx(1.5)
    assert section["trim"]["peak_rss_growth_mib"] == pytest.approx(5.0)
    assert section["peers_without_parallel_row"] == {
        "pydantic_ai": "not measured in this run",
        "openai_agents": "not installed",
    }
    assert result["batch"][PLAN_ROWS[0]]["kind"] == "actionspace"
    assert kind_of(PLAN_ROWS[1]) == "actionspace"


def test_a_peer_faster_than_the_plan_or_a_slow_dag_or_a_large_heap_fails() -> None:
    agg = _agg({"mcp.x": 10.0}, makespan=230.0, growth=65 << 20)
    agg["batch"][PLAN_ROWS[0]] = {"median_ms": 12.0}  # 1.14 × gather
    for row in agg["extra"]:
        row[DAG_ROW]["zero_latency_us_per_node"] = 25.0
    section = parallel_section(agg)
    statuses = [t["status"] for t in section["targets"]]
    assert statuses == ["FAIL", "FAIL", "FAIL", "FAIL", "FAIL"]


@pytest.mark.parametrize(("apart", "beside", "status"), [(9.0, 10.5, "PASS"), (10.5, 9.0, "FAIL")])
def test_the_gather_target_reads_the_gather_timed_beside_the_plan(
    apart: float, beside: float, status: str
) -> None:
    """The plan (11.0 ms) against gather: the batches timed alternately with it decide, not the
    floor row timed in another part of the run (the machine's load moves between the two)."""
    agg = _agg({"mcp.x": 22.0}, makespan=209.0, growth=5 << 20)
    agg["batch"]["batch.direct.asyncio_gather"] = {"median_ms": apart}
    agg["batch"][GATHER_BESIDE_ROW] = {"median_ms": beside}
    section = parallel_section(agg)
    target = section["targets"][0]
    assert target["status"] == status
    assert f"{11.0 / beside:.2f} × gather timed beside it ({beside:.2f} ms" in target["detail"]
    assert f"{11.0 / apart:.2f} × the gather row timed apart" in target["detail"]
    assert section["peers"] == {"batch.mcp.x": 22.0}  # the gather beside the plan is no peer
    assert kind_of(GATHER_BESIDE_ROW) == "floor"


def test_batches_timed_beside_each_other_alternate() -> None:
    order: list[str] = []

    def batch(tag: str) -> Any:
        async def run() -> list[int]:
            order.append(tag)
            return list(range(BATCH))

        return run

    rows = asyncio.run(time_batches([batch("plan"), batch("gather")], 4))
    assert order == ["plan", "gather"] + ["plan", "gather"] * 4  # a check of each, then in turn
    assert [row["reps"] for row in rows] == [4, 4]


def test_without_parallel_rows_every_target_is_not_applicable() -> None:
    section = parallel_section({"batch": {}, "extra": []})
    assert section["status"] == "n/a"
    assert {t["status"] for t in section["targets"]} == {"n/a"}


def test_parallel_and_trim_stand_for_their_row_prefixes() -> None:
    assert SECTIONS["parallel"] == ("batch.", "dag.")
    assert SECTIONS["trim"] == ("trim.",)


def test_a_trim_only_run_reports_the_quick_log_and_renders() -> None:
    result = run_bench(passes=1, scale=0.01, only=["trim"])
    assert result["errors"] == {} and result["percall"] == {} and result["batch"] == {}
    trim = result["parallel"]["trim"]
    assert trim["bytes"] == MIN_LOG_BYTES and trim["passes"] == 1
    assert trim["status"] in {"PASS", "FAIL"} and trim["mib_per_s"] > 0
    assert json.loads(json.dumps(result)) == result
    out = io.StringIO()
    Console(file=out, width=200).print(render(result))
    text = out.getvalue()
    assert "trim.log_v1: 64 MiB generated log" in text and "parallel targets:" in text
