"""The command line in a new user's first hour: every help page shows an example, the help lists every
value a command takes, a wrong value names its option, a missing extra names the install that brings
it, and tables stay whole at 80 columns.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
import typer
from typer.testing import CliRunner, Result

import actionspace
from actionspace import Runtime, ToolCall
from actionspace.cli import _mount, app

NARROW = {"COLUMNS": "80", "TERM": "dumb"}
runner = CliRunner(env=NARROW)


def _invoke(*args: str) -> Result:
    _mount()
    return runner.invoke(app, list(args))


def _paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in getattr(command, "commands", {}).items():
        found += _paths(sub, (*path, name))
    return found


def _every_command() -> list[tuple[str, ...]]:
    _mount()
    return _paths(typer.main.get_command(app))


@pytest.mark.parametrize("path", _every_command(), ids=lambda p: " ".join(p) or "actionspace")
def test_every_help_page_shows_an_example_command(path: tuple[str, ...]) -> None:
    shown = _invoke(*path, "--help")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.stdout.split())
    assert re.search(r"Examples?: actionspace\b", text), text


def test_the_version_is_one_line_naming_the_package() -> None:
    shown = _invoke("--version")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == f"actionspace {actionspace.__version__}\n"


def test_approvals_list_help_names_every_status_it_accepts() -> None:
    from actionspace.approval.requests import ApprovalStatus

    text = " ".join(_invoke("approvals", "list", "--help").stdout.split())
    for status in (*get_args(ApprovalStatus), "all"):
        assert re.search(rf"\b{status}\b", text), (status, text)


def test_an_unknown_bfcl_stage_is_a_usage_error_naming_the_option() -> None:
    refused = _invoke("eval", "bfcl", "--stage", "fast")
    assert refused.exit_code == 2, refused.output
    assert "--stage" in refused.stderr and "fast" in " ".join(refused.stderr.split())


def test_agentdojo_missing_names_the_eval_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agentdojo", None)  # import agentdojo raises ImportError
    refused = _invoke("eval", "agentdojo", "--mode", "benign")
    assert refused.exit_code == 1, refused.output
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: ") and "pip install 'actionspace[eval]'" in line, line


def test_the_sweep_table_shows_every_crash_point_and_kind_whole_at_80_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actionspace import _crash
    from actionspace.evaluation import sweep as sweeping

    rows = [
        {"point": p, "kind": k, "cases": 20, "crashed": 20, "duplicates": 0, "lost": 0}
        | {"unknown_commit": 20 if k == "none" else 0, "incomplete": 0}
        for p in _crash.POINTS
        for k in sweeping.KINDS
    ]
    monkeypatch.setattr(sweeping, "sweep", lambda **_: [])
    monkeypatch.setattr(sweeping, "table", lambda _: rows)
    shown = _invoke("sweep", "--seeds", "20")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert max(map(len, lines)) <= 80, shown.stdout
    for point in _crash.POINTS:
        for kind in sweeping.KINDS:
            assert any(re.search(rf"\b{point}\s+{kind}\s+20\s+20\b", line) for line in lines), (point, kind)
    header = " ".join(lines[:6])
    for column in ("cases", "crashed", "duplicates", "lost", "unknown", "incomplete"):
        assert column in header, header


@pytest.fixture()
def lost_send(tmp_path: Path) -> tuple[str, str]:
    """A SQLite store holding one unknown_commit entry, and its key."""
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url)

    @rt.tool(effect="external")
    def send(to: str) -> str:
        """Send a message through a relay that cannot be asked what it did."""
        raise TimeoutError("the relay did not answer")

    lost = rt.call(ToolCall(name="send", arguments={"to": "bob"}), run_id="r1", node_id="send-bob")
    assert lost.error is not None and lost.error.category == "unknown_commit"
    entry = rt.ledger.get_node("r1", "send-bob")
    rt.close()
    assert entry is not None
    return url, entry.key


def _resolve(url: str, key: str, outcome: str) -> Result:
    return _invoke(
        "ledger", "resolve", key[:10], "--outcome", outcome, "--by", "ops", "--reason", "x", "--store", url
    )


def test_ledger_resolve_names_the_store_it_reads_once(lost_send: tuple[str, str]) -> None:
    url, key = lost_send
    done = _resolve(url, key, "committed")
    assert done.exit_code == 0, done.output
    assert [line for line in done.stderr.splitlines() if line.startswith("store: ")] == [f"store: {url}"]


def test_an_unknown_resolve_outcome_is_refused_before_the_store_is_read(lost_send: tuple[str, str]) -> None:
    url, key = lost_send
    refused = _resolve(url, key, "maybe")
    assert refused.exit_code == 1, refused.output
    assert refused.stderr == "error: outcome must be 'committed' or 'failed'\n"


def test_resolve_takes_not_committed_as_the_http_api_spells_failed(lost_send: tuple[str, str]) -> None:
    url, key = lost_send
    done = _resolve(url, key, "not_committed")
    assert done.exit_code == 0, done.output
    assert done.stdout == f"{key}: failed (by ops)\n"
    rt = Runtime(url)
    try:
        entry = rt.ledger.get(key)
        assert entry is not None and entry.state == "failed"
    finally:
        rt.close()
