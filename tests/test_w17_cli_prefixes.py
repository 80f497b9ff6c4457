"""The last commands refuse as every other does: one line on stderr behind ``error: ``, and an
option that names nothing is a usage error (exit 2, the choices listed) before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app
from actionspace.errors import ConfigurationError

runner = CliRunner(env={"COLUMNS": "200", "TERM": "dumb"})


def _invoke(*args: str) -> Result:
    _mount()
    return runner.invoke(app, list(args))


def _refusal(result: Result, code: int = 1) -> str:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(said) == 1, result.stderr
    assert said[0].startswith("error: "), said[0]
    return said[0]


def test_worker_without_its_extra_refuses_with_the_common_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from actionspace import _extras

    def missing(*_: object, **__: object) -> None:
        raise ConfigurationError("actionspace worker needs dbos:\npip install 'actionspace[durable]'")

    monkeypatch.setattr(_extras, "require", missing)
    said = _refusal(_invoke("worker", "--store", "postgresql://x@localhost/db", "--tools", "m:t"))
    assert "pip install 'actionspace[durable]'" in said
    assert not said.startswith("error: actionspace worker:")


@pytest.fixture()
def nothing_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from actionspace.evaluation import agentdojo

    ran: list[str] = []

    def run(*_: object, **__: object) -> object:
        ran.append("run")
        raise AssertionError("the benchmark ran")

    monkeypatch.setattr(agentdojo, "run_agentdojo", run)
    return ran


@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["--mode", "atack"], "benign, attack"),
        (["--policy", "provenence"], "provenance, strict, default, none"),
        (["--approver", "allow"], "task, deny"),
        (["--suite", "banking", "--suite", "mail"], "workspace, travel, banking, slack"),
    ],
)
def test_an_agentdojo_option_naming_nothing_is_a_usage_error_before_any_work(
    args: list[str], choices: str, nothing_run: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agentdojo", None)
    result = _invoke("eval", "agentdojo", *args, "--json")
    assert result.exit_code == 2, result.output
    assert nothing_run == []
    assert choices in result.output
    assert "Traceback" not in result.output and "not installed" not in result.output


def test_agentdojo_missing_is_refused_with_the_common_prefix(
    nothing_run: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "agentdojo", None)
    said = _refusal(_invoke("eval", "agentdojo", "--json"))
    assert "agentdojo is not installed" in said and "pip install" in said
    assert nothing_run == []


def test_an_agentdojo_run_that_cannot_start_is_refused_with_the_common_prefix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("agentdojo")
    from actionspace.evaluation import agentdojo

    def refuse(*_: object, **__: object) -> object:
        raise KeyError("no such\ntask set")

    monkeypatch.setattr(agentdojo, "run_agentdojo", refuse)
    said = _refusal(_invoke("eval", "agentdojo", "--json"))
    assert "cannot start" in said and "no such task set" in said


def test_an_unknown_agentdojo_task_set_is_a_usage_error_before_any_work(nothing_run: list[str]) -> None:
    pytest.importorskip("agentdojo")
    result = _invoke("eval", "agentdojo", "--benchmark-version", "v9.9", "--json")
    assert result.exit_code == 2, result.output
    assert nothing_run == []
    assert "v1.2.2" in result.output


def test_eval_parse_without_corpus_files_refuses_on_stderr(tmp_path: Path) -> None:
    said = _refusal(_invoke("eval", "parse", "--corpus", str(tmp_path)))
    assert "no corpus files found" in said and str(tmp_path) in said


def test_eval_parse_with_a_missing_corpus_folder_refuses_on_stderr(tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    said = _refusal(_invoke("eval", "parse", "--corpus", str(missing)))
    assert str(missing) in said


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{not json", "not JSON"),
        ('{"cases": []}', "family"),
        ('["a list"]', "family"),
        ('{"family": "x", "cases": 3}', "cases"),
        ('{"family": "x", "cases": [{"id": "a", "calls": []}]}', "raw"),
        ('{"family": "x", "cases": [{"id": "a", "raw": "", "calls": [{"name": "f"}]}]}', "calls"),
        (b"\xff\xfe{", "not"),
    ],
)
def test_eval_parse_with_a_damaged_corpus_file_refuses_naming_it(
    tmp_path: Path, text: str | bytes, named: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(text if isinstance(text, bytes) else text.encode())
    said = _refusal(_invoke("eval", "parse", "--corpus", str(tmp_path)))
    assert str(bad) in said and named in said


@pytest.mark.parametrize("target", ["no_such_module_w17:setup", "no-colon", "json:no_such_function"])
def test_worker_with_tools_that_cannot_load_refuses_in_one_line(target: str) -> None:
    pytest.importorskip("dbos")
    said = _refusal(_invoke("worker", "--store", "postgresql://x@127.0.0.1:1/db", "--tools", target))
    assert "--tools" in said and target in said
