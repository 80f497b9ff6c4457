"""What a new user's mistakes leave behind: one line, a non-zero exit, and nothing written.

A malformed PostgreSQL URL or a config file that is not UTF-8 is refused in one line (never a
traceback); an import that fails creates no store; an evaluation never continues the runs an
earlier evaluation left in the same ``--out`` folder.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace.cli import _mount, app

runner = CliRunner(env={"COLUMNS": "80", "TERM": "dumb", "ACTIONSPACE_STORE": ""})


def _invoke(*args: str) -> Result:
    _mount()
    return runner.invoke(app, list(args))


def _refused(result: Result, code: int = 1) -> str:
    """The one line a refusal says (the store it read aside), after checking the exit and no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output
    said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("store: ")]
    assert len(said) == 1, result.stderr
    return said[0]


@pytest.mark.parametrize(
    "url", ["postgresql://[::1", "postgresql://app@[db/x", "postgresql://host/db?no_such_option=1"]
)
@pytest.mark.parametrize(
    "command", [("ledger", "list"), ("trace", "list"), ("approvals", "list"), ("monitor",)]
)
def test_a_malformed_postgresql_url_is_refused_in_one_line(command: tuple[str, ...], url: str) -> None:
    said = _refused(_invoke(*command, "--store", url))
    assert "PostgreSQL" in said


def test_a_gateway_config_that_is_not_utf8_is_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    config = tmp_path / "gateway.toml"
    config.write_bytes(b'[gateway]\nname = "\xff\xfe"\n')
    said = _refused(_invoke("gateway", "--config", str(config)), code=2)
    assert "gateway.toml" in said and "utf-8" in said.lower()


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "not-utf8.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    (tmp_path / "a-list.jsonl").write_text("[1, 2]\n")
    (tmp_path / "a-folder").mkdir()
    good = {"run_id": "r1", "seq": 0, "kind": "run_started", "ts": 1.0, "call_id": None, "data": {}}
    (tmp_path / "bad-last-line.jsonl").write_text(json.dumps(good) + "\n{\n")
    return {
        "missing": tmp_path / "missing.jsonl",
        "folder": tmp_path / "a-folder",
        "not-utf8": tmp_path / "not-utf8.jsonl",
        "not-an-object": tmp_path / "a-list.jsonl",
        "bad-last-line": tmp_path / "bad-last-line.jsonl",
    }


@pytest.mark.parametrize("kind", ["missing", "folder", "not-utf8", "not-an-object", "bad-last-line"])
def test_a_failed_import_creates_no_store_nor_its_folders(tmp_path: Path, kind: str) -> None:
    source = _bad_inputs(tmp_path)[kind]
    target = tmp_path / "new" / "deeper" / "traces.db"
    _refused(_invoke("trace", "import", str(source), "--store", f"sqlite:///{target}"))
    assert not (tmp_path / "new").exists()


def test_a_failed_import_leaves_an_existing_store_as_it_was(tmp_path: Path) -> None:
    good = {"run_id": "r1", "seq": 0, "kind": "run_started", "ts": 1.0, "call_id": None, "data": {}}
    first = tmp_path / "first.jsonl"
    first.write_text(json.dumps(good) + "\n")
    store = f"sqlite:///{tmp_path / 'kept.db'}"
    assert _invoke("trace", "import", str(first), "--store", store).exit_code == 0
    source = _bad_inputs(tmp_path)["bad-last-line"]
    _refused(_invoke("trace", "import", str(source), "--store", store))
    listed = _invoke("trace", "list", "--store", store, "--json")
    assert [r["run_id"] for r in json.loads(listed.stdout)] == ["r1"]


def test_an_interrupted_import_into_a_new_store_leaves_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace.trace import cli as trace_cli

    def interrupted(*_: object, **__: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(trace_cli, "import_jsonl", interrupted)
    source = tmp_path / "one.jsonl"
    source.write_text('{"run_id": "r1", "seq": 0, "kind": "run_started", "ts": 1.0, "data": {}}\n')
    result = _invoke("trace", "import", str(source), "--store", f"sqlite:///{tmp_path / 'new' / 't.db'}")
    said = _refused(result, code=130)
    assert "interrupted" in said
    assert not (tmp_path / "new").exists()


def _rows(db: Path) -> list[str]:
    """What the file holds, statement by statement (its pages may move when a reader checkpoints)."""
    conn = sqlite3.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def test_an_evaluation_refuses_an_out_folder_holding_an_earlier_evaluations_traces(tmp_path: Path) -> None:
    out = tmp_path / "report"
    first = _invoke("eval", "suite", "support-desk", "--limit", "1", "--out", str(out), "--json")
    assert first.exit_code == 0, first.output
    traces = out / "ungated" / "trace.db"
    before = _rows(traces)
    metrics = (out / "metrics.json").read_text()
    again = _invoke("eval", "suite", "support-desk", "--limit", "1", "--out", str(out), "--json")
    said = _refused(again)
    assert "trace" in said and str(out) in said
    assert _rows(traces) == before and (out / "metrics.json").read_text() == metrics


def test_every_command_summary_is_one_line() -> None:
    import typer

    _mount()

    def leaves(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, object]]:
        subs = getattr(command, "commands", None)
        if subs:
            return [leaf for name, sub in subs.items() for leaf in leaves(sub, (*path, name))]
        return [(" ".join(path), command)]

    for name, command in leaves(typer.main.get_command(app)):
        summary = (getattr(command, "help", None) or "").strip().split("\n\n")[0]
        assert "\n" not in summary, f"'actionspace {name}': its summary spans lines: {summary!r}"


@pytest.mark.parametrize(
    "command",
    [("ledger", "list"), ("approvals", "list"), ("trace", "list"), ("trace", "show", "r1"), ("monitor",)],
)
@pytest.mark.parametrize(
    "url",
    ["postgresql://app:s3cr3t-pw@nohost.invalid/x", "postgresql://app@nohost.invalid/x?password=s3cr3t-pw"],
)
def test_a_store_password_is_never_printed(command: tuple[str, ...], url: str) -> None:
    _mount()
    for given in (["--store", url], []):  # on the command line, or in ACTIONSPACE_STORE
        result = runner.invoke(app, [*command, *given], env={"ACTIONSPACE_STORE": url})
        assert result.exit_code == 1, result.output
        assert "s3cr3t" not in result.stdout + result.stderr
        assert "nohost.invalid" in result.stderr  # the store is still named


def test_a_store_url_is_shown_without_its_password() -> None:
    from actionspace._cli_tables import shown_store

    assert shown_store("postgresql://app:pw@db:5432/x?sslmode=require") == (
        "postgresql://app:***@db:5432/x?sslmode=require"
    )
    assert shown_store("postgres://db/x?user=a&password=pw&sslmode=disable") == (
        "postgres://db/x?user=a&password=***&sslmode=disable"
    )
    assert shown_store("sqlite:////tmp/a:b@c.db") == "sqlite:////tmp/a:b@c.db"
    assert shown_store("memory://") == "memory://"


@pytest.mark.parametrize(
    "args",
    [
        ["--out", "report"],  # writes only with --policy
        ["--stage", "validator", "--policy", "replay:ground-truth"],  # --stage is for the checks alone
    ],
)
def test_eval_bfcl_refuses_options_it_would_ignore(
    args: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from actionspace.evaluation import bfcl, eval_cli

    ran: list[str] = []

    def recorder(name: str) -> object:
        def record(*_: object, **__: object) -> dict[str, object]:
            ran.append(name)
            return {}

        return record

    monkeypatch.setattr(bfcl, "run_bfcl_checks", recorder("checks"))
    monkeypatch.setattr(eval_cli, "eval_suite_command", recorder("suite"))
    monkeypatch.chdir(tmp_path)
    result = _invoke("eval", "bfcl", *args)
    assert result.exit_code == 2, result.output
    assert ran == [] and not (tmp_path / "report").exists()
    assert args[0] in result.stderr
