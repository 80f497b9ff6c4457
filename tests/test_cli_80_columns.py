"""The CLI at 80 columns (CI logs, pipes): ids whole and copyable, prefixes accepted, the store named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from actionspace import Runtime, ToolCall
from actionspace.cli import _mount, app

WIDTH = {"COLUMNS": "80", "TERM": "dumb"}
runner = CliRunner(env=WIDTH)


@pytest.fixture()
def store(tmp_path: Path) -> str:
    """A store with two approval requests and three ledger entries, one of them unknown_commit."""
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url)

    @rt.tool(effect="write", writes=["note:{key}"], requires_approval=True)
    def gated(key: str, text: str) -> str:
        """A write a person must approve."""
        return text

    @rt.tool(effect="write", writes=["note:{key}"])
    def note(key: str, text: str) -> str:
        """Write a note somewhere with a rather long description of what it does."""
        return text

    for n in range(3):
        rt.call(
            ToolCall(name="note", arguments={"key": f"k{n}", "text": "x" * 60}),
            run_id=f"run-with-a-long-id-{n}",
        )
    for n in range(2):
        rt.call(ToolCall(name="gated", arguments={"key": f"g{n}", "text": "y" * 60}), run_id="run-approvals")
    rt.close()
    _mount()
    return url


def _lines_fit(text: str) -> None:
    assert max(len(line) for line in text.splitlines()) <= 80, text


def test_ledger_list_shows_every_key_whole_at_80_columns(store: str) -> None:
    keys = [
        e["key"]
        for e in json.loads(runner.invoke(app, ["ledger", "list", "--json", "--store", store]).stdout)
    ]
    listed = runner.invoke(app, ["ledger", "list", "--store", store])
    assert listed.exit_code == 0, listed.output
    _lines_fit(listed.stdout)
    assert len(keys) == 3 and all(key in listed.stdout for key in keys)


def test_approvals_list_shows_every_id_whole_at_80_columns(store: str) -> None:
    ids = [
        r["id"]
        for r in json.loads(runner.invoke(app, ["approvals", "list", "--json", "--store", store]).stdout)
    ]
    listed = runner.invoke(app, ["approvals", "list", "--store", store])
    assert listed.exit_code == 0, listed.output
    _lines_fit(listed.stdout)
    assert len(ids) == 2 and all(i in listed.stdout for i in ids)


def test_trace_list_shows_every_run_id_whole_at_80_columns(store: str) -> None:
    listed = runner.invoke(app, ["trace", "list", "--store", store])
    assert listed.exit_code == 0, listed.output
    _lines_fit(listed.stdout)
    assert all(f"run-with-a-long-id-{n}" in listed.stdout for n in range(3))


def test_ledger_show_and_resolve_accept_a_unique_prefix(store: str) -> None:
    entries = json.loads(runner.invoke(app, ["ledger", "list", "--json", "--store", store]).stdout)
    key = entries[0]["key"]
    shown = runner.invoke(app, ["ledger", "show", key[:10], "--store", store])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["key"] == key


def test_approvals_show_and_approve_accept_a_unique_prefix(store: str) -> None:
    requests = json.loads(runner.invoke(app, ["approvals", "list", "--json", "--store", store]).stdout)
    rid = requests[0]["id"]
    shown = runner.invoke(app, ["approvals", "show", rid[:12], "--store", store])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["id"] == rid
    approved = runner.invoke(app, ["approvals", "approve", rid[:12], "--by", "alice", "--store", store])
    assert approved.exit_code == 0, approved.output
    assert f"{rid}: approved by alice" in approved.stdout


def test_an_ambiguous_prefix_names_the_candidates(store: str) -> None:
    shown = runner.invoke(app, ["approvals", "show", "apr_", "--store", store])
    assert shown.exit_code == 1
    assert "matches 2" in shown.stderr


def test_every_command_says_which_store_it_reads(store: str) -> None:
    for args in (["ledger", "list"], ["approvals", "list"], ["trace", "list"]):
        done = runner.invoke(app, [*args, "--store", store])
        assert f"store: {store}" in done.stderr, (args, done.stderr)
