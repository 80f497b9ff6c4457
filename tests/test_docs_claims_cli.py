"""What the commands' --help and the docs promise about options, checked against what they do."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from actionspace import Runtime, ToolCall
from actionspace._store_url import sqlite_path
from actionspace.cli import _mount, app
from actionspace.errors import ConfigurationError
from actionspace.evaluation.runner import Environment, EnvironmentInput
from actionspace.evaluation.suite import ExpectedCall, Suite, Task

runner = CliRunner()

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _help_of(*path: str) -> dict[str, str]:
    """The --help line of every option of ``actionspace <path>``, by option name."""
    _mount()
    command: Any = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return {p.opts[0]: p.help or "" for p in command.params if p.opts[0].startswith("--")}


def _suite(folder: Path) -> Path:
    expected = ((ExpectedCall(name="get_weather", arguments={"city": ("Paris",)}),),)
    task = Task(id="w1", request="Weather in Paris?", tools=(WEATHER,), expected=expected)
    return Suite(name="mini", tasks=(task,)).save(folder / "mini.json")


def weather_environment(inp: EnvironmentInput) -> Environment:
    """A runtime factory for the command line's --tools."""
    rt = Runtime(inp.store, recover_on_start=False)

    @rt.tool(effect="read")
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"sunny in {city}"

    return Environment(runtime=rt)


def test_every_sqlite_url_the_monitor_help_shows_is_one_the_store_accepts() -> None:
    text = _help_of("monitor")["--store"]
    shown = re.findall(r"sqlite:/+[\w$./-]*\w", text)
    assert shown, text
    for url in shown:
        try:
            sqlite_path(url.replace("$", ""))
        except ConfigurationError as exc:
            pytest.fail(f"--help shows {url}, which the store refuses: {exc}")
    assert any(url.startswith("sqlite:////") for url in shown), "no absolute path form shown"


@pytest.mark.parametrize("limit", ["0", "-1", str(10**20)])
def test_ledger_list_refuses_a_limit_that_is_not_a_positive_count(tmp_path: Path, limit: str) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(store, recover_on_start=False)

    @rt.tool(effect="write")
    def save(key: str) -> str:
        """Save a key."""
        return key

    assert rt.call(ToolCall(name="save", arguments={"key": "k"})).ok
    rt.close()
    listed = runner.invoke(app, ["ledger", "list", "--store", store, "--limit", limit, "--json"])
    assert listed.exit_code == 2, listed.output
    assert listed.exception is None or isinstance(listed.exception, SystemExit)
    assert "--limit" in listed.output


@pytest.mark.parametrize("ttl", ["inf", "nan", "0", "-5"])
def test_an_approval_that_would_never_expire_is_refused(tmp_path: Path, ttl: str) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(store, recover_on_start=False)

    @rt.tool(effect="external", idempotency="native", requires_approval=True)
    def pay(to: str, cents: int, idempotency_key: str) -> int:
        """Pay someone."""
        return cents

    held = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 5}), run_id="r1", node_id="p")
    request_id = held.error.details["request_id"] if held.error else ""
    rt.close()
    decided = runner.invoke(
        app, ["approvals", "approve", request_id, "--by", "al", "--ttl", ttl, "--store", store]
    )
    assert decided.exit_code == 2 and "--ttl" in decided.output, decided.output
    shown = runner.invoke(app, ["approvals", "show", request_id, "--store", store])
    assert json.loads(shown.stdout)["status"] == "pending"


def test_demo_refuses_a_today_that_is_not_an_iso_date(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    result = runner.invoke(app, ["demo", "--today", "next tuesday", "--store", store, "--scenario", "1"])
    assert result.exit_code == 2 and "--today" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("where", ["store", "dir"])
def test_demo_with_an_unusable_store_or_folder_says_so_in_one_line(tmp_path: Path, where: str) -> None:
    _mount()
    in_the_way = tmp_path / "notes.txt"
    in_the_way.write_text("not a database\n")
    store = f"sqlite:///{in_the_way if where == 'store' else tmp_path / 'trace.db'}"
    folder = tmp_path / ("demo" if where == "store" else "notes.txt/demo")
    result = runner.invoke(app, ["demo", "--store", store, "--dir", str(folder), "--scenario", "3"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "did not run" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_eval_gate_without_a_runtime_factory_is_refused_not_ignored(tmp_path: Path) -> None:
    _mount()
    suite = str(_suite(tmp_path))
    for gate in ("default", "sometimes"):
        result = runner.invoke(app, ["eval", "suite", suite, "--gate", gate, "--workers", "1", "--json"])
        assert result.exit_code == 2 and "--gate" in result.output, result.output


def test_eval_ablation_on_a_runtime_factory_is_refused_not_ignored(tmp_path: Path) -> None:
    _mount()
    suite = str(_suite(tmp_path))
    tools = f"{__name__}:weather_environment"
    args = ["eval", "suite", suite, "--tools", tools, "--ablation", "names_hidden", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "--ablation" in result.output, result.output
    played = runner.invoke(app, ["eval", "suite", suite, "--tools", tools, "--json"])
    assert played.exit_code == 0, played.output
    assert json.loads(played.stdout)["layers"]["p_exec"] == 1.0


def test_eval_out_through_a_file_stops_before_the_run(tmp_path: Path) -> None:
    _mount()
    suite = str(_suite(tmp_path))
    (tmp_path / "taken").write_text("")
    out = tmp_path / "taken" / "report"
    result = runner.invoke(app, ["eval", "suite", suite, "--out", str(out), "--workers", "1"])
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "cannot start" in result.output


def test_trace_list_refuses_a_limit_past_what_a_store_can_count(tmp_path: Path) -> None:
    _mount()
    store = f"sqlite:///{tmp_path / 'as.db'}"
    Runtime(store, recover_on_start=False).close()
    listed = runner.invoke(app, ["trace", "list", "--store", store, "--limit", str(10**20)])
    assert listed.exit_code == 2 and "--limit" in listed.output, listed.output
    assert runner.invoke(app, ["trace", "list", "--store", store, "--limit", "5"]).exit_code == 0
