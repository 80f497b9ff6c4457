"""The command line as a new user meets it: wrong options are usage errors, refusals are one line.

Each refusal is one line on stderr at 80 columns (CI logs, pipes) with a non-zero exit code and no
traceback; an option that names nothing the command knows is refused before any work starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app

NARROW = {"COLUMNS": "80", "TERM": "dumb"}
runner = CliRunner(env=NARROW)


def _invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    _mount()
    return runner.invoke(app, list(args), env=env)


def _said(result: Result) -> list[str]:
    """What the command said on stderr, the store it read aside."""
    return [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("store: ")]


def _one_line(result: Result, *expected: str) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    said = _said(result)
    assert len(said) == 1, result.stderr
    for part in expected:
        assert part in said[0], said[0]
    return said[0]


@pytest.fixture()
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The sweep, the timeout trials and the store benchmark replaced by recorders."""
    from actionspace.bench import stores
    from actionspace.evaluation import sweep, timeouts

    ran: list[str] = []

    def recorder(name: str, answer: object) -> object:
        def record(*_: object, **__: object) -> object:
            ran.append(name)
            return answer

        return record

    monkeypatch.setattr(sweep, "sweep", recorder("sweep", []))
    monkeypatch.setattr(timeouts, "execute_and_timeout", recorder("timeouts", {}))
    monkeypatch.setattr(stores, "store_throughput", recorder("bench-stores", {}))
    return ran


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["sweep", "--point", "before_intnet"], "before_intent"),
        (["sweep", "--kind", "natvie"], "native"),
        (["sweep", "--seeds", "0"], "--seeds"),
        (["timeouts", "--trials", "-1"], "--trials"),
        (["timeouts", "--trials", "0"], "--trials"),
        (["bench-stores", "--store", "mysql"], "postgres"),
        (["bench-stores", "--processes", "0"], "--processes"),
        (["bench-stores", "--calls", "0"], "--calls"),
    ],
)
def test_an_option_naming_nothing_is_a_usage_error_before_any_work(
    args: list[str], named: str, nothing_runs: list[str]
) -> None:
    result = _invoke(*args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert nothing_runs == []
    assert named in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "command",
    [["trace", "show", "r1"], ["trace", "export", "r1"], ["trace", "replay", "r1", "--runtime", "os:getcwd"]],
)
def test_a_trace_refusal_with_a_long_path_is_one_line_at_80_columns(
    command: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / ("a-rather-long-folder-name-" * 3) / "typo" / "trace.db"
    said = _one_line(_invoke(*command, "--store", f"sqlite:///{missing}"), "no trace store at", str(missing))
    assert said.startswith("error: ")


def test_a_trace_refusal_spanning_lines_in_the_driver_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"  # nothing listens on port 1
    said = _one_line(_invoke("trace", "show", "r1", "--store", url), "cannot connect to PostgreSQL")
    assert "\t" not in said


def test_an_eval_refusal_is_one_line_and_keeps_brackets_in_names(tmp_path: Path) -> None:
    name = str(tmp_path / ("a-long-folder-name-" * 3) / "[bold]suite.json")
    said = _one_line(_invoke("eval", "suite", name, "--policy", "replay:ground-truth"), "cannot start")
    assert name in said


def test_serve_builds_its_runtime_on_a_store_whose_folder_does_not_exist_yet(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    from actionspace.service.cli import prepare

    url = f"sqlite:///{tmp_path / 'fresh-home' / '.actionspace' / 'actionspace.db'}"
    served = prepare(store=url, host="127.0.0.1", port=8765, token="t0ken", tools=(), demo=True)
    with served.stack:
        assert served.runtime.store_url == url
        assert {"share_with_partner", "create_event"} <= {t.name for t in served.runtime.catalog.offerable()}


def test_serve_on_an_unsupported_store_url_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    home = tmp_path / "home"
    home.mkdir()
    env = {**NARROW, "HOME": str(home), "ACTIONSPACE_HOME": "", "ACTIONSPACE_STORE": ""}
    _one_line(_invoke("serve", "--store", "mysql://db/x", env=env), "unsupported", "mysql://db/x")
    assert list(home.iterdir()) == []
