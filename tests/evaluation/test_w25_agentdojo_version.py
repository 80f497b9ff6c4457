"""``eval agentdojo`` checks the task-set version through agentdojo's public ``get_suites``, not its
private registry, and says plainly what the installed agentdojo lacks."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app

pytest.importorskip("agentdojo")

from agentdojo.task_suite import load_suites

runner = CliRunner(env={"COLUMNS": "200", "TERM": "dumb"})


@pytest.fixture()
def nothing_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from actionspace.evaluation import agentdojo

    ran: list[str] = []

    def run(*_: object, **__: object) -> object:
        ran.append("run")
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(agentdojo, "run_agentdojo", run)
    return ran


def _invoke(*args: str) -> Result:
    _mount()
    return runner.invoke(app, ["eval", "agentdojo", *args, "--json"])


def _without_private_registry(monkeypatch: pytest.MonkeyPatch, registry: dict[str, dict[str, Any]]) -> None:
    """An agentdojo whose private registry is gone (renamed in a release) but whose public
    ``get_suites`` still answers."""
    monkeypatch.delattr(load_suites, "_SUITES")
    monkeypatch.setattr(load_suites, "get_suites", lambda version: dict(registry.get(version, {})))


def test_an_unknown_task_set_is_refused_without_reading_agentdojos_private_registry(
    monkeypatch: pytest.MonkeyPatch, nothing_run: list[str]
) -> None:
    registry = {"v1.2.2": dict(load_suites.get_suites("v1.2.2"))}
    _without_private_registry(monkeypatch, registry)
    result = _invoke("--benchmark-version", "v9.9")
    assert result.exit_code == 2, result.output
    assert nothing_run == []
    assert "v9.9" in result.output and "v1.2.2" in result.output


def test_a_task_set_missing_a_requested_suite_is_refused_naming_the_suite(
    monkeypatch: pytest.MonkeyPatch, nothing_run: list[str]
) -> None:
    suites = dict(load_suites.get_suites("v1.2.2"))
    registry = {"v1.2.2": {name: s for name, s in suites.items() if name != "slack"}}
    _without_private_registry(monkeypatch, registry)
    result = _invoke("--suite", "slack")
    assert result.exit_code == 2, result.output
    assert nothing_run == []
    assert "slack" in result.output


def test_an_agentdojo_without_get_suites_is_a_one_line_error_naming_the_pinned_release(
    monkeypatch: pytest.MonkeyPatch, nothing_run: list[str]
) -> None:
    monkeypatch.delattr(load_suites, "get_suites")
    result = _invoke()
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("error: ") and "agentdojo==0.1.35" in said[0], said
    assert nothing_run == []


def test_the_pinned_task_set_passes_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from actionspace.evaluation.agentdojo_cli import DEFAULT_BENCHMARK_VERSION, check_version

    check_version(DEFAULT_BENCHMARK_VERSION, ("workspace", "banking"))
