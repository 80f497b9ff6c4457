"""The bench harness: structure and correctness of what it measures, never timing."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from actionspace.bench import SCHEMA, render, run_bench
from actionspace.bench import _peers as peers
from actionspace.bench._durable import BESIDE_ROW, CALLERS, FLOOR_ROW, GROUP_ROW, OUR_ROW, _group_row
from actionspace.bench._paired import PAIRED_PEER, PAIRED_ROW, run_paired
from actionspace.bench._passes import _collect, _selected, aggregate, run_group
from actionspace.bench._render import _targets as render_targets
from actionspace.bench._report import annotate, durable_targets
from actionspace.bench._timing import Pass, matches
from actionspace.bench.cli import bench_command

OURS = (
    "actionspace.call.sync_tool",
    "actionspace.acall.async_tool",
    "actionspace.acall.sync_tool",
    "actionspace.acall.toolcall",
    "actionspace.session.ahandle.async_tool",  # one agent-loop turn
)


@pytest.fixture(scope="module")
def smoke() -> dict[str, Any]:
    return run_bench(passes=1, scale=0.01, only=["direct", "actionspace"])


def test_a_smoke_run_measures_the_floors_and_every_path_of_ours(smoke: dict[str, Any]) -> None:
    assert smoke["schema"] == SCHEMA
    assert smoke["errors"] == {}
    assert smoke["skipped"] == {}
    names = set(smoke["percall"])
    assert {"direct.sync_tool", "direct.async_tool", *OURS} <= names
    assert all(n.startswith(("direct.", "actionspace.")) for n in names)
    assert set(smoke["batch"]) == {
        "batch.direct.asyncio_gather",
        "batch.actionspace.acall.gather",
        "batch.actionspace.acall_all.message",  # the same calls as one model message
        "batch.actionspace.call_all.message",  # that message from sync code
    }
    for name, row in smoke["percall"].items():
        rounds = name == GROUP_ROW  # one sample per round of CALLERS concurrent calls
        assert row["n_per_pass"] >= (200 // CALLERS if rounds else 200) and row["passes"] == 1
        assert {"median_us", "p99_us", "pass_medians_us", "kind", "variant", "reference", "ratio"} <= set(row)


def test_the_durable_rows_say_how_much_of_a_call_the_processor_spent(smoke: dict[str, Any]) -> None:
    rows = smoke["percall"]
    for name in (OUR_ROW, BESIDE_ROW):  # CPU time on the calling thread: never above the call's wall time
        assert 0 < rows[name]["cpu_us"] <= rows[name]["median_us"] * 1.05 + 5, name
    group = rows[GROUP_ROW]
    assert 0 < group["cores_busy"] <= (os.cpu_count() or 1) + 0.1
    # the process's CPU time per call over the rounds is the cores kept busy times a call's wall share
    assert group["cpu_us"] > 0


def test_the_concurrent_callers_row_times_only_calls_of_node_ids_not_made_before() -> None:
    # a call of a node id already committed replays its outcome without writing: timing it would
    # flatter the row
    seen: list[int] = []
    lock = threading.Lock()

    def call(i: int) -> Any:
        with lock:
            seen.append(i)
        return SimpleNamespace(status="ok", data=3)

    p = Pass(0.01, [], log=lambda _line: None)
    _group_row(p, call)
    assert p.errors == {} and GROUP_ROW in p.percall
    assert len(seen) > CALLERS * 25 and len(set(seen)) == len(seen)


def test_aggregate_keeps_the_median_cpu_time_where_every_pass_measured_it() -> None:
    def row(median: float, **extra: float) -> dict[str, Any]:
        return {
            "median_us": median,
            "p99_us": median,
            "min_us": median,
            "calls_per_sample": 1,
            "n": 9,
            "result": 3,
            **extra,
        }

    passes = [
        {
            "percall": {OUR_ROW: row(500, cpu_us=400), GROUP_ROW: row(480, cpu_us=470, cores_busy=0.9)},
            "batch": {},
            "errors": {},
            "skipped": {},
            "elapsed_s": {},
        },
        {
            "percall": {OUR_ROW: row(520, cpu_us=420), GROUP_ROW: row(470, cpu_us=460)},
            "batch": {},
            "errors": {},
            "skipped": {},
            "elapsed_s": {},
        },
        {
            "percall": {OUR_ROW: row(510, cpu_us=460), GROUP_ROW: row(490, cpu_us=480, cores_busy=1.0)},
            "batch": {},
            "errors": {},
            "skipped": {},
            "elapsed_s": {},
        },
    ]
    rows = aggregate(passes)["percall"]
    assert rows[OUR_ROW]["cpu_us"] == 420 and rows[GROUP_ROW]["cpu_us"] == 470
    assert "cores_busy" not in rows[GROUP_ROW]  # one pass did not measure it: no figure from two of three


def test_our_paths_return_the_tools_result_as_observation_data(smoke: dict[str, Any]) -> None:
    for name in OURS:
        assert smoke["percall"][name]["result"] == {"status": "ok", "data": 3}, name
    assert smoke["percall"]["direct.sync_tool"]["result"] == 3


def test_rows_are_compared_with_our_row_of_the_same_calling_convention(smoke: dict[str, Any]) -> None:
    rows = smoke["percall"]
    assert rows["direct.async_tool"]["reference"] == "actionspace.acall.async_tool"
    assert rows["direct.sync_tool"]["reference"] == "actionspace.call.sync_tool"
    assert rows["direct.async_tool"]["ratio"] is not None
    assert rows["actionspace.acall.async_tool"]["reference"] is None


def test_without_peer_rows_the_target_is_not_applicable(smoke: dict[str, Any]) -> None:
    assert smoke["target"] == "n/a"
    assert [t["status"] for t in smoke["targets"]] == ["n/a", "n/a"]


def test_the_result_is_json_and_renders(smoke: dict[str, Any]) -> None:
    assert json.loads(json.dumps(smoke)) == smoke
    out = io.StringIO()
    Console(file=out, width=200).print(render(smoke))
    text = out.getvalue()
    assert "actionspace.acall.async_tool" in text and "target: n/a" in text
    assert "load average" in text and "pydantic" in text


def _row(median: float, tail: float = 2.0) -> dict[str, Any]:
    return {"median_us": median, "p99_us": median * tail}


def test_a_long_tail_fails_the_target_even_at_a_fast_median() -> None:
    agg: dict[str, Any] = {
        "percall": {
            "actionspace.acall.async_tool": _row(10.0, tail=3.5),
            "openai_agents.on_invoke_tool.async_tool": _row(40.0),
        },
        "batch": {},
    }
    target = annotate(agg)["targets"][0]
    assert target["ratio"] == pytest.approx(0.25) and target["status"] == "FAIL"
    assert target["p99_over_median"] == pytest.approx(3.5)


def test_the_durable_targets_hold_one_caller_to_the_raw_commit_and_eight_to_three_times_one() -> None:
    percall = {FLOOR_ROW: _row(200.0), OUR_ROW: _row(380.0), GROUP_ROW: _row(120.0)}
    one, group = durable_targets(percall)
    assert one["status"] == "PASS" and group["status"] == "PASS"
    one, group = durable_targets({**percall, OUR_ROW: _row(500.0), GROUP_ROW: _row(200.0)})
    assert one["status"] == "FAIL" and group["status"] == "FAIL"
    assert [t["status"] for t in durable_targets({})] == ["n/a", "n/a"]


def test_the_durable_targets_say_what_the_processor_did_when_the_rows_measured_it() -> None:
    percall = {
        BESIDE_ROW: {**_row(200.0), "cpu_us": 140.0},
        OUR_ROW: {**_row(500.0), "cpu_us": 410.0},
        GROUP_ROW: {**_row(480.0), "cpu_us": 470.0, "cores_busy": 0.98},
    }
    one, group = durable_targets(percall)
    assert "(410 µs of CPU on its thread)" in one["detail"] and "(140 µs of CPU)" in one["detail"]
    assert "0.98 of" in group["detail"] and "470 µs of CPU a call" in group["detail"]
    plain, _ = durable_targets({BESIDE_ROW: _row(200.0), OUR_ROW: _row(500.0)})
    assert "CPU" not in plain["detail"]


def test_the_one_caller_ratio_takes_the_raw_insert_timed_beside_our_calls_when_there_is_one() -> None:
    # the floor process saw a fast disk, our calls a slow one: the pair timed together decides
    percall = {FLOOR_ROW: _row(100.0), BESIDE_ROW: _row(300.0), OUR_ROW: _row(500.0)}
    one, _ = durable_targets(percall)
    assert one["status"] == "PASS" and "300 µs per raw insert" in one["detail"]
    assert durable_targets({**percall, BESIDE_ROW: _row(200.0)})[0]["status"] == "FAIL"


def test_the_target_passes_at_half_the_fastest_peer_and_fails_above() -> None:
    agg: dict[str, Any] = {
        "percall": {
            "actionspace.acall.async_tool": _row(10.0),
            "actionspace.acall.sync_tool": _row(60.0),
            "pydantic_ai.tool_manager.handle_call.async_tool": _row(20.0),
            "openai_agents.on_invoke_tool.async_tool": _row(40.0),
            "openai_agents.on_invoke_tool.sync_tool": _row(100.0),
        },
        "batch": {"batch.actionspace.acall.gather": {"median_ms": 12.0}, "batch.mcp.x": {"median_ms": 24.0}},
    }
    result = annotate(agg)
    by_label = {t["ours"]: t for t in result["targets"]}
    async_target = by_label["actionspace.acall.async_tool"]
    assert async_target["status"] == "PASS"
    assert async_target["peer"] == "pydantic_ai.tool_manager.handle_call.async_tool"
    assert async_target["ratio"] == pytest.approx(0.5)
    assert by_label["actionspace.acall.sync_tool"]["status"] == "FAIL"
    assert result["target"] == "FAIL"
    assert result["percall"]["openai_agents.on_invoke_tool.async_tool"]["ratio"] == pytest.approx(0.25)
    assert result["batch"]["batch.mcp.x"]["ratio"] == pytest.approx(0.5)


def _paired(ratio: float, peer: str = PAIRED_PEER) -> dict[str, Any]:
    row = {"ours_us": 14.0, "peer_us": 14.0 / ratio, "ratio": ratio, "ratio_q1": ratio, "ratio_q3": ratio}
    return {PAIRED_ROW: {**row, "blocks": 4, "block_size": 500, "peer": peer}}


def test_the_async_target_reads_the_ratio_of_the_calls_alternated_in_one_process() -> None:
    # ours timed in a fast process, the peer in a slow one: 0.45 across processes, 0.88 paired
    percall = {"actionspace.acall.async_tool": _row(9.0), PAIRED_PEER: _row(20.0)}
    agg: dict[str, Any] = {
        "percall": percall,
        "batch": {},
        "extra": [_paired(0.9), _paired(0.88), _paired(0.87)],
    }
    target = annotate(agg)["targets"][0]
    assert target["ratio"] == pytest.approx(0.88) and target["status"] == "FAIL"
    assert target["ratio_across_processes"] == pytest.approx(0.45)
    assert target["paired"]["pass_ratios"] == [0.9, 0.88, 0.87]
    # and the other way round: a slow process of ours beside a fast one of the peer's
    agg = {"percall": {**percall, PAIRED_PEER: _row(12.0)}, "batch": {}, "extra": [_paired(0.45)]}
    target = annotate(agg)["targets"][0]
    assert target["ratio"] == pytest.approx(0.45) and target["status"] == "PASS"
    out = io.StringIO()
    Console(file=out, width=300).print(render_targets(annotate({**agg, "extra": [_paired(0.45)]})))
    assert (
        "0.45 × fastest peer openai_agents.on_invoke_tool.async_tool, alternated in one process"
        in out.getvalue()
    )


def test_the_paired_group_alternates_our_calls_and_the_peers_in_one_pass() -> None:
    p = Pass(0.01, ["paired"], log=lambda _line: None)
    run_paired(p)
    row = p.extra[PAIRED_ROW]
    assert p.errors == {} and row["blocks"] == 4 and row["peer"] == PAIRED_PEER
    assert row["ours_us"] > 0 and row["peer_us"] > 0
    assert row["ratio_q1"] <= row["ratio"] <= row["ratio_q3"]
    assert _selected(["paired"]) == ["paired"]


def test_a_paired_ratio_against_a_peer_that_is_not_the_fastest_is_not_read() -> None:
    percall = {
        "actionspace.acall.async_tool": _row(9.0),
        PAIRED_PEER: _row(20.0),
        "pydantic_ai.tool_manager.handle_call.async_tool": _row(10.0),
    }
    target = annotate({"percall": percall, "batch": {}, "extra": [_paired(0.3)]})["targets"][0]
    assert target["peer"] == "pydantic_ai.tool_manager.handle_call.async_tool"
    assert target["ratio"] == pytest.approx(0.9) and "paired" not in target


def test_only_prefixes_select_rows_and_their_batch_rows() -> None:
    assert matches("batch.actionspace.acall.gather", ["actionspace"])
    assert matches("mcp.inproc_direct.sync_tool", ["mcp.inproc"])
    assert not matches("mcp.inproc_direct.sync_tool", ["direct"])
    assert matches("anything", [])
    p = Pass(1.0, ["mcp.inproc_direct"])
    assert p.wants_any("mcp.") and not p.wants_any("langgraph.")
    assert Pass(1.0, ["batch"]).wants_any("direct.")


def test_a_missing_peer_package_is_reported_as_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(peers.PEERS, "mcp", ("actionspace_no_such_peer_module", peers.run_mcp))
    p = Pass(0.01, [], log=lambda _line: None)
    peers.run_peer(p, "mcp")
    assert "actionspace_no_such_peer_module" in p.skipped["mcp"]
    assert p.percall == {} and p.errors == {}


def test_a_row_that_returns_the_wrong_value_is_an_error_not_a_figure() -> None:
    p = Pass(0.01, [], log=lambda _line: None)
    p.sync("direct.wrong", lambda i: i, 200, extract=lambda r: r, expect=3)
    assert "direct.wrong" in p.errors and "direct.wrong" not in p.percall


def test_bad_arguments_are_developer_errors() -> None:
    with pytest.raises(ValueError):
        run_bench(passes=0)
    with pytest.raises(ValueError):
        run_bench(scale=0)


def test_the_command_prints_json() -> None:
    import typer

    app = typer.Typer()
    app.command()(bench_command)
    out = CliRunner().invoke(
        app, ["--json", "--passes", "1", "--scale", "0.01", "--only", "direct.sync", "-q"]
    )
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert set(result["percall"]) == {"direct.sync_tool", "direct.sync_tool_to_thread"}
    assert result["percall"]["direct.sync_tool"]["result"] == 3


def test_a_pass_in_a_spawned_interpreter_gives_the_same_rows() -> None:
    part = run_group("floors", 0.01, ["direct.sync_tool"])
    assert set(part["percall"]) == {"direct.sync_tool", "direct.sync_tool_to_thread"}
    assert part["percall"]["direct.sync_tool"]["result"] == 3 and part["errors"] == {}


def test_a_pass_whose_process_dies_is_an_error_entry(tmp_path: Path) -> None:
    missing = tmp_path / "never-written.json"
    died = _collect("mcp", 1, missing, ["Traceback", "boom"], 0.0)
    assert died["percall"] == {} and "exited with status 1" in died["errors"]["mcp"]
    assert "boom" in died["errors"]["mcp"]
    timed_out = _collect("mcp", -int(signal.SIGALRM), missing, [], 0.0)
    assert "timed out" in timed_out["errors"]["mcp"]


def test_store_throughput_runs_every_call_of_every_process() -> None:
    from actionspace.bench.stores import store_throughput

    result = store_throughput(processes=(1, 2), calls=5, stores=("sqlite",))
    assert [(r["processes"], r["calls"], r["failed"]) for r in result["sqlite"]] == [(1, 5, 0), (2, 10, 0)]
