"""``actionspace ledger …`` / ``approvals …`` given hostile ids, run ids and arguments.

Whatever a run id, node id, tool reason or a typed key holds (rich markup, terminal escapes,
bytes that are not UTF-8), the table prints it as inert text, a refusal is one plain line, and the
exit code says what happened.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from actionspace import Runtime
from actionspace._canonical import args_digest
from actionspace.approval.requests import ApprovalRequest
from actionspace.cli import _mount, app
from actionspace.ledger.sqlite_approvals import SqliteApprovalStore

runner = CliRunner(env={"COLUMNS": "200"})

HOSTILE_RUN = "[bold red]r[/]\x1b[31mESC\x1b]0;title\x07\u202eevil"
MARKUP_BREAKER = "n[/x]\x1b[2J[/]"


def _store_with_hostile_entry(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'as.db'}"
    rt = Runtime(url)

    @rt.tool(effect="write", writes=["x:{a}"])
    def do_it(a: str) -> str:
        return a

    try:
        obs = rt.call({"name": "do_it", "arguments": {"a": "v"}}, run_id=HOSTILE_RUN, node_id=MARKUP_BREAKER)
        assert obs.status == "ok", obs.error
    finally:
        rt.close()
    return url


def _invoke(*argv: str) -> Result:
    _mount()
    return runner.invoke(app, list(argv))


def _no_control_characters(text: str) -> None:
    for ch in ("\x1b", "\x07", "\u202e"):
        assert ch not in text, repr(text)


def test_a_ledger_listing_prints_markup_and_escapes_in_ids_as_inert_text(tmp_path: Path) -> None:
    url = _store_with_hostile_entry(tmp_path)
    listed = _invoke("ledger", "list", "--store", url)
    assert listed.exit_code == 0, (listed.output, listed.exception)
    _no_control_characters(listed.stdout)
    flat = "".join(line.strip() for line in listed.stdout.splitlines())
    assert "[bold red]r[/]" in flat and "\\x1b[31mESC" in flat, listed.stdout
    as_json = _invoke("ledger", "list", "--store", url, "--json")
    assert as_json.exit_code == 0
    assert json.loads(as_json.stdout)[0]["run_id"] == HOSTILE_RUN


def test_an_approval_listing_prints_hostile_reasons_and_arguments_as_inert_text(tmp_path: Path) -> None:
    db = tmp_path / "as.db"
    arguments = {"to": "[/]\x1b[2Jbob"}
    request = ApprovalRequest(
        id="apr_hostile",
        run_id="run_cli",
        node_id="n1",
        tool="send@1",
        args_digest=args_digest(arguments),
        arguments=arguments,
        provenance={"to": "user"},
        reason="[link=http://evil]click[/link]\x1b]8;;http://evil\x07",
    )
    with SqliteApprovalStore(db) as approvals:
        approvals.create(request)
    listed = _invoke("approvals", "list", "--store", f"sqlite:///{db}")
    assert listed.exit_code == 0, (listed.output, listed.exception)
    _no_control_characters(listed.stdout)
    assert "[link=http://evil]click[/link]" in listed.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "show", "as1_\x1b[31mX"],
        ["ledger", "resolve", "as1_\x1b]0;t\x07", "--outcome", "failed", "--by", "ann", "--reason", "r"],
        ["approvals", "show", "apr_\x1b[2J"],
        ["approvals", "deny", "apr_\x9b31m", "--by", "ann"],
    ],
)
def test_a_refused_id_is_echoed_without_its_terminal_escapes(tmp_path: Path, argv: list[str]) -> None:
    url = _store_with_hostile_entry(tmp_path)
    refused = _invoke(*argv, "--store", url)
    assert refused.exit_code == 1, refused.output
    said = [line for line in refused.stderr.splitlines() if not line.startswith("store: ")]
    assert len(said) == 1, refused.stderr
    assert "\x1b" not in said[0] and "\x07" not in said[0] and "\x9b" not in said[0]
    assert "\\x1b" in said[0] or "\\x9b" in said[0], said[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["ledger", "show", "\udcff\udcfe"],
        ["ledger", "resolve", "\udcff", "--outcome", "committed", "--by", "ann", "--reason", "r"],
        ["ledger", "resolve", "as1_x", "--outcome", "committed", "--by", "\udcff", "--reason", "r"],
        ["approvals", "show", "\udcff"],
        ["approvals", "approve", "apr_x", "--by", "ann", "--reason", "\udcff"],
    ],
)
def test_an_argument_that_is_not_utf8_is_a_usage_error_not_a_traceback(
    tmp_path: Path, argv: list[str]
) -> None:
    """Bytes that are not UTF-8 reach the command as lone surrogates (how Python decodes argv)."""
    url = _store_with_hostile_entry(tmp_path)
    refused = _invoke(*argv, "--store", url)
    assert refused.exit_code == 2, (refused.output, refused.exception)
    assert refused.exception is None or isinstance(refused.exception, SystemExit), repr(refused.exception)
    assert "UTF-8" in refused.output


def test_a_very_long_key_is_refused_in_one_line_of_bounded_length(tmp_path: Path) -> None:
    url = _store_with_hostile_entry(tmp_path)
    refused = _invoke("ledger", "show", "k" * 100_000, "--store", url)
    assert refused.exit_code == 1
    said = [line for line in refused.stderr.splitlines() if not line.startswith("store: ")]
    assert len(said) == 1 and len(said[0]) < 400, len(said[0])


def test_printable_keeps_ordinary_text_and_escapes_every_control_or_invisible_character() -> None:
    from actionspace._cli_tables import printable

    assert printable("as1_ab · run/n1 é 日本") == "as1_ab · run/n1 é 日本"
    assert printable("a\x1bb\x00c\x7fd\x85e\u200bf\u202eg\ud800") == (
        "a\\x1bb\\x00c\\x7fd\\x85e\\u200bf\\u202eg\\ud800"
    )
