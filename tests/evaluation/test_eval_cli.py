"""`actionspace eval suite`: a suite file and a policy in, metrics.json and report.html out."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from actionspace.cli import _mount, app
from actionspace.evaluation.suite import ExpectedCall, Suite, Task

TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _suite(path: Path) -> Path:
    suite = Suite(
        name="mini",
        tasks=(
            Task(
                id="w1",
                request="Weather in Paris?",
                tools=(TOOL,),
                expected=((ExpectedCall(name="get_weather", arguments={"city": ("Paris",)}),),),
            ),
            Task(id="n1", category="no_tool", request="Hello!", tools=(TOOL,), no_call=True),
        ),
    )
    return suite.save(path)


def test_the_ground_truth_scores_one_on_every_layer_and_the_report_is_written(tmp_path: Path) -> None:
    _mount()
    suite = _suite(tmp_path / "mini.json")
    result = CliRunner().invoke(app, ["eval", "suite", str(suite), "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    written = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert printed["layers"] == written["layers"]
    assert written["n"] == 2
    assert set(written["layers"].values()) == {1.0}
    assert written["by_category"]["no_tool"]["n"] == 1
    assert "<svg" in (tmp_path / "out" / "report.html").read_text()


def test_a_replayed_wrong_tool_drops_select(tmp_path: Path) -> None:
    _mount()
    suite = _suite(tmp_path / "mini.json")
    replay = tmp_path / "replay.jsonl"
    raw = {"role": "assistant", "content": "It is sunny.", "tool_calls": []}
    wrong = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    replay.write_text(
        json.dumps({"task_id": "w1", "turn": 0, "raw": raw})
        + "\n"
        + json.dumps({"task_id": "n1", "turn": 0, "raw": wrong})
        + "\n"
    )
    result = CliRunner().invoke(app, ["eval", "suite", str(suite), "--policy", f"replay:{replay}", "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout[result.stdout.index("{") :])
    assert metrics["layers"]["p_parse"] == 1.0
    assert metrics["layers"]["p_select"] == 0.0


def test_an_unknown_suite_file_exits_1(tmp_path: Path) -> None:
    _mount()
    result = CliRunner().invoke(app, ["eval", "suite", str(tmp_path / "missing.json")])
    assert result.exit_code == 1


def test_reported_confidences_feed_the_reliability_diagram_and_the_threshold_policy(tmp_path: Path) -> None:
    _mount()
    suite = _suite(tmp_path / "mini.json")
    call = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        json.dumps({"task_id": "w1", "turn": 0, "raw": call, "confidence": 0.97})
        + "\n"
        + json.dumps({"task_id": "n1", "turn": 0, "raw": call, "confidence": 0.6})
        + "\n"
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["eval", "suite", str(suite), "--policy", f"replay:{replay}", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    written = json.loads((out / "metrics.json").read_text())
    thresholds = written["thresholds"]
    assert thresholds["steps"] == 2
    assert thresholds["executed"] == 1  # 0.97 reaches the strictest threshold; 0.6 does not
    assert thresholds["wrong_avoided"] == 1  # the call in the no-tool task would have been wrong
    html = (out / "report.html").read_text()
    assert "Risk-dependent thresholds" in html and "Reliability diagram" in html


def test_a_bfcl_run_lists_its_disagreements_with_bfcls_checker_in_json_and_report(tmp_path: Path) -> None:
    _mount()
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["eval", "suite", "bfcl:simple_java,irrelevance", "--out", str(out), "--json"]
    )
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout[result.stdout.index("{") :])
    summary = printed["reference_checker"]
    assert summary["compared"] == 100 + 240
    assert summary["disagree"] == len(printed["disagreements"]) > 0
    assert summary["agree"] + summary["disagree"] == summary["compared"]
    assert all(d["explanation"] and d["bfcl_error"] for d in printed["disagreements"])
    assert {d["category"] for d in printed["disagreements"]} == {"simple_java"}
    assert json.loads((out / "metrics.json").read_text())["disagreements"] == printed["disagreements"]
    assert "tasks compared" in (out / "report.html").read_text()
