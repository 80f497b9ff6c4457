"""Every command refuses alike: one line on stderr, prefixed ``error: ``, whatever the driver said.

The ledger and approvals commands show an example in their help as every other command does;
an eval option that names nothing is a usage error before any work; a SQLite path that can never
be opened is a mistake in the configuration that names the path, not an outage to retry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app
from tests.test_w15_docs_commands import _args, _command, _leaves

NARROW = {"COLUMNS": "80", "TERM": "dumb"}
runner = CliRunner(env=NARROW)
REFUSED_PG = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"  # nothing listens on port 1

LEDGER_COMMANDS = {
    "ledger list": ["ledger", "list"],
    "ledger show": ["ledger", "show", "as1_x"],
    "ledger resolve": ["ledger", "resolve", "as1_x", "--outcome", "failed", "--by", "ann", "--reason", "r"],
    "approvals list": ["approvals", "list"],
    "approvals show": ["approvals", "show", "apr_x"],
    "approvals approve": ["approvals", "approve", "apr_x", "--by", "ann"],
    "approvals deny": ["approvals", "deny", "apr_x", "--by", "ann"],
}


def _invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    _mount()
    return runner.invoke(app, list(args), env=env)


def _refusal(result: Result, code: int = 1) -> str:
    """The one line the command said (the store line aside), after checking the exit and no traceback."""
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("store: ")]
    assert len(said) == 1, result.stderr
    assert "\\x0a" not in said[0] and "\\x09" not in said[0] and "\t" not in said[0], said[0]
    assert said[0].startswith("error: "), said[0]
    return said[0]


@pytest.mark.parametrize("command", sorted(LEDGER_COMMANDS))
def test_a_refused_postgresql_connection_is_one_plain_line_in_ledger_commands(command: str) -> None:
    pytest.importorskip("psycopg")
    said = _refusal(_invoke(*LEDGER_COMMANDS[command], "--store", REFUSED_PG))
    assert "cannot connect to PostgreSQL" in said and "Is the server running" in said


def test_a_refused_postgresql_connection_is_one_line_in_demo(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    said = _refusal(_invoke("demo", "--scenario", "1", "--dir", str(tmp_path), "--store", REFUSED_PG))
    assert "cannot connect to PostgreSQL" in said


def test_a_refused_postgresql_connection_is_one_line_in_monitor() -> None:
    pytest.importorskip("psycopg")
    said = _refusal(_invoke("monitor", "--store", REFUSED_PG))
    assert "cannot connect to PostgreSQL" in said and "Is the server running" in said


def test_a_monitor_refusal_with_a_long_path_is_one_line_at_80_columns(tmp_path: Path) -> None:
    missing = tmp_path / ("a-rather-long-folder-name-" * 3) / "typo" / "trace.db"
    said = _refusal(_invoke("monitor", "--store", f"sqlite:///{missing}"))
    assert str(missing) in said


def test_a_bad_since_in_monitor_is_one_line(tmp_path: Path) -> None:
    said = _refusal(_invoke("monitor", "--since", "yesterday-ish-" * 8))
    assert "--since" in said


@pytest.mark.parametrize(
    "command",
    [
        ["ledger", "show", "as1_x"],
        ["approvals", "list"],
        ["trace", "show", "r1"],
        ["monitor"],
    ],
)
def test_a_missing_store_is_refused_with_the_same_prefix_everywhere(
    command: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "typo" / "as.db"
    assert str(missing) in _refusal(_invoke(*command, "--store", f"sqlite:///{missing}"))


def test_demo_refusals_use_the_common_prefix(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    said = _refusal(_invoke("demo", "--dir", str(blocker / "sub"), "--store", "memory://"))
    assert "cannot make the folder" in said


def test_plan_check_refusals_use_the_common_prefix(tmp_path: Path) -> None:
    assert "cannot read" in _refusal(_invoke("plan", "check", str(tmp_path / "missing.json")))
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    assert "not JSON" in _refusal(_invoke("plan", "check", str(bad)))


def test_eval_refusals_use_the_common_prefix(tmp_path: Path) -> None:
    said = _refusal(_invoke("eval", "suite", str(tmp_path / "missing.json")))
    assert "cannot start" in said


def test_serve_refusals_use_the_common_prefix(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    home = tmp_path / "home"
    home.mkdir()
    env = {**NARROW, "HOME": str(home), "ACTIONSPACE_HOME": "", "ACTIONSPACE_STORE": ""}
    assert "mysql://db/x" in _refusal(_invoke("serve", "--store", "mysql://db/x", env=env))


def _ledger_examples() -> list[tuple[str, str]]:
    import re

    _mount()
    found = []
    for path, command in _leaves(typer.main.get_command(app)):
        if path[0] in ("ledger", "approvals"):
            text = f"{command.help or ''}\n{command.epilog or ''}"
            said = re.findall(r"Example: (actionspace [^\n(]*)", text)
            found.append((" ".join(path), said[0].strip() if said else ""))
    return found


def test_every_ledger_and_approvals_command_is_checked() -> None:
    assert {name for name, _ in _ledger_examples()} == set(LEDGER_COMMANDS)


@pytest.mark.parametrize(("name", "example"), _ledger_examples(), ids=[n for n, _ in _ledger_examples()])
def test_every_ledger_command_help_shows_an_example_that_parses(name: str, example: str) -> None:
    assert example.startswith(f"actionspace {name}"), f"'actionspace {name} --help' shows no example"
    command, path, args = _command(_args(example))
    assert " ".join(path) == name
    command.make_context(f"actionspace {name}", list(args), resilient_parsing=False)
    shown = _invoke(*name.split(), "--help", env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "Example: actionspace" in shown.stdout


@pytest.fixture()
def nothing_evaluated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Loading a suite and evaluating it replaced by recorders."""
    from actionspace.evaluation import eval_cli
    from actionspace.evaluation import runner as eval_runner

    ran: list[str] = []

    def load(spec: str) -> object:
        ran.append(f"load {spec}")
        raise AssertionError("the suite was loaded")

    def evaluate(*_: object, **__: object) -> object:
        ran.append("evaluate")
        raise AssertionError("the suite was evaluated")

    monkeypatch.setattr(eval_cli, "load_suite", load)
    monkeypatch.setattr(eval_runner, "evaluate", evaluate)
    return ran


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--ablation", "nonsense"], "names_hidden"),
        (["--ablation", "names_hidden", "--ablation", "counterfactul"], "counterfactual"),
        (["--ablation", "baseline"], "feedback_bare"),
        (["--mutate", "nonsense"], "wrong_type"),
        (["--policy", "replya:ground-truth"], "scripted"),
        (["--gate", "sometimes"], "calibrated"),
    ],
)
def test_an_eval_option_naming_nothing_is_a_usage_error_before_any_work(
    args: list[str], named: str, nothing_evaluated: list[str]
) -> None:
    result = _invoke("eval", "suite", "demo", *args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert nothing_evaluated == []
    assert named in result.output
    assert "Traceback" not in result.output


def test_eval_bfcl_with_an_unknown_mutation_is_a_usage_error_before_any_work(
    nothing_evaluated: list[str],
) -> None:
    result = _invoke("eval", "bfcl", "--mutate", "nonsense", env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert nothing_evaluated == []
    assert "wrong_type" in result.output


def _never_opens(tmp_path: Path, case: str) -> Path:
    if case == "a folder":
        folder = tmp_path / "stores"
        folder.mkdir()
        return folder
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder")
    return blocker / "as.db"


@pytest.mark.parametrize("case", ["a folder", "through a file"])
@pytest.mark.parametrize("command", sorted(LEDGER_COMMANDS))
def test_a_sqlite_path_that_can_never_open_is_a_configuration_error_naming_it(
    command: str, case: str, tmp_path: Path
) -> None:
    path = _never_opens(tmp_path, case)
    said = _refusal(_invoke(*LEDGER_COMMANDS[command], "--store", f"sqlite:///{path}"))
    assert str(path) in said and "try again" not in said


@pytest.mark.parametrize("case", ["a folder", "through a file"])
def test_a_demo_store_that_can_never_open_is_a_configuration_error_naming_it(
    case: str, tmp_path: Path
) -> None:
    path = _never_opens(tmp_path, case)
    result = _invoke("demo", "--scenario", "1", "--dir", str(tmp_path / "d"), "--store", f"sqlite:///{path}")
    said = _refusal(result)
    assert str(path) in said and "try again" not in said


def test_main_names_a_store_outage_with_the_common_prefix(capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3
    import sys

    from actionspace import cli

    def locked(*_: object, **__: object) -> None:
        raise sqlite3.OperationalError("database is locked\nby another writer")

    _mount()
    argv, sys.argv = sys.argv, ["actionspace", "ledger", "list"]
    original = cli.app
    try:
        cli.app = locked  # type: ignore[assignment]
        with pytest.raises(SystemExit) as stopped:
            cli.main()
    finally:
        cli.app, sys.argv = original, argv
    assert stopped.value.code == 1
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: the store did not answer") and "try again" in line
