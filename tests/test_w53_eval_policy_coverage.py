"""``eval suite --policy replay:FILE`` / ``scripted:FILE`` whose file answers none or few of the tasks.

A file with no outputs, or only outputs of another suite's tasks, would score every task as if the
model proposed nothing: refused in one line (exit 1) before any task runs. A file that answers some
of the tasks runs, with one warning line naming how many tasks it has no output for.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner, Result

from actionspace.cli import app
from actionspace.evaluation.suite import demo_suite

runner = CliRunner(env={"COLUMNS": "200"})


def _eval(policy: str, out: Path | None = None) -> Result:
    extra = ["--out", str(out)] if out is not None else []
    return runner.invoke(app, ["eval", "suite", "demo", "--policy", policy, "--workers", "1", *extra])


def _refusal(result: Result, *expected: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1, result.stderr
    for part in expected:
        assert part in said[0], said[0]
    return said[0]


def _ground_truth_lines(task_ids: list[str]) -> str:
    """One replay line per task: its first expected turn as a raw tool call, as a model would send it."""
    lines = []
    for task in demo_suite().tasks:
        if task.id in task_ids:
            lines.append(json.dumps({"task_id": task.id, "turn": 0, "raw": "I would rather not."}))
    return "\n".join(lines) + "\n"


def test_an_empty_replay_file_is_refused_before_any_task_runs(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    out = tmp_path / "out"
    _refusal(_eval(f"replay:{empty}", out), "cannot start:", str(empty), "no output")
    assert not (out / "metrics.json").exists()


def test_an_empty_script_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text("{}")
    _refusal(_eval(f"scripted:{script}"), "cannot start:", str(script), "no output")


def test_a_script_whose_tasks_have_no_turns_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({t.id: [] for t in demo_suite().tasks}))
    _refusal(_eval(f"scripted:{script}"), "cannot start:", "no output")


def test_a_replay_of_another_suites_tasks_is_refused_naming_the_mismatch(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"task_id": "simple_python_0", "turn": 0, "raw": "x"}) + "\n")
    said = _refusal(_eval(f"replay:{other}"), "cannot start:", "none of the 3 tasks")
    assert "simple_python_0" in said and "demo_calendar_review" in said


def test_a_replay_answering_some_tasks_runs_with_one_warning(tmp_path: Path) -> None:
    ids = [t.id for t in demo_suite().tasks]
    partial = tmp_path / "partial.jsonl"
    partial.write_text(_ground_truth_lines(ids[:1]))
    result = _eval(f"replay:{partial}")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.stderr
    assert "2 of the 3 tasks" in warnings[0] and ids[1] in warnings[0] and ids[0] not in warnings[0]


def test_a_replay_answering_every_task_runs_without_a_warning(tmp_path: Path) -> None:
    ids = [t.id for t in demo_suite().tasks]
    whole = tmp_path / "whole.jsonl"
    whole.write_text(_ground_truth_lines(ids))
    result = _eval(f"replay:{whole}")
    assert result.exit_code == 0, result.output
    assert "warning: " not in result.stderr
