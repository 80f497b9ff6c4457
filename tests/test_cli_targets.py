"""``module:function`` targets named on the command line (``trace replay --runtime``, ``--tools``):
a module that fails as it is imported is the user's mistake, told in one line."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from typer.testing import CliRunner

from actionspace._loader import load_callable
from actionspace.errors import ConfigurationError
from actionspace.trace.cli import trace_app
from actionspace.trace.sqlite import SqliteTraceStore
from tests.trace.factories import calendar_run

_names = itertools.count()

FAILING_MODULES = {
    "a syntax error": ("def build(:\n", "SyntaxError"),
    "an exception of its own": (
        "raise RuntimeError('set API_KEY first')\n",
        "RuntimeError: set API_KEY first",
    ),
    "a library it calls failing": ("import json\njson.loads('{')\n", "JSONDecodeError"),
}


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str) -> str:
    name = f"cli_target_{next(_names)}_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


@pytest.mark.parametrize("case", sorted(FAILING_MODULES))
def test_a_module_failing_as_it_is_imported_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    source, expected = FAILING_MODULES[case]
    module = _module(tmp_path, monkeypatch, source)
    with pytest.raises(ConfigurationError, match="--runtime") as raised:
        load_callable(f"{module}:build", option="--runtime")
    assert expected in str(raised.value)


@pytest.mark.parametrize("case", sorted(FAILING_MODULES))
def test_trace_replay_with_a_runtime_module_failing_at_import_exits_1_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    source, expected = FAILING_MODULES[case]
    module = _module(tmp_path, monkeypatch, source)
    with SqliteTraceStore(tmp_path / "trace.db") as store:
        store.append_many(calendar_run("run-1", start=1_700_000_000.0))
    argv = [
        "replay",
        "run-1",
        "--runtime",
        f"{module}:build",
        "--store",
        f"sqlite:///{tmp_path / 'trace.db'}",
    ]
    result = CliRunner(env={"COLUMNS": "400"}).invoke(trace_app, argv)
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot load") and expected in line
