"""``actionspace plan check`` runs exactly the checks ``run_plan`` runs before anything executes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from actionspace import Runtime, tool
from actionspace.cli import _mount, app
from actionspace.policy.principal import Principal

runner = CliRunner()


@tool(effect="read", reads=["vendor:{name}"])
def licence(name: str) -> dict[str, Any]:
    """Look up a vendor's licence."""
    return {"vendor": name}


@tool(effect="write", writes=["list:approved"], scopes=["lists:write"])
def approve(vendors: list[str]) -> int:
    """Add vendors to the approved list."""
    return len(vendors)


TOOLS: list[Callable[..., Any]] = [licence, approve]


def readers_only() -> Runtime:
    """A runtime whose principal may read but not write (for --tools)."""
    return Runtime("memory://", tools=TOOLS, principal=Principal(id="ro", scopes=("read:*",)))


BAD_PLANS = {
    "duplicate ids": {
        "nodes": [
            {"id": "a", "tool": "licence", "arguments": {"name": "x"}},
            {"id": "a", "tool": "licence", "arguments": {"name": "y"}},
        ]
    },
    "a reference to a missing node": {
        "nodes": [{"id": "w", "tool": "approve", "arguments": {"vendors": [{"$ref": "nope.data.vendor"}]}}]
    },
    "a cycle": {
        "nodes": [
            {"id": "a", "tool": "licence", "arguments": {"name": "x"}, "depends_on": ["b"]},
            {"id": "b", "tool": "licence", "arguments": {"name": "y"}, "depends_on": ["a"]},
        ]
    },
}


def _check(tmp_path: Path, plan: Any, *options: str) -> Any:
    _mount()
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return runner.invoke(app, ["plan", "check", str(path), *options])


@pytest.mark.parametrize("case", sorted(BAD_PLANS))
def test_plan_check_rejects_what_run_plan_rejects(tmp_path: Path, case: str) -> None:
    plan = BAD_PLANS[case]
    rejected = Runtime("memory://", tools=TOOLS).run_plan(plan)
    assert rejected.status == "error" and rejected.error is not None
    for options in ((), ("--tools", "tests.test_cli_plan:TOOLS")):
        result = _check(tmp_path, plan, *options)
        assert result.exit_code == 1, result.output
        assert json.loads(result.output)["category"] == rejected.error.category


def test_plan_check_with_tools_checks_permissions_and_schemas_too(tmp_path: Path) -> None:
    plan = {"nodes": [{"id": "w", "tool": "approve", "arguments": {"vendors": ["acme"]}}]}
    assert _check(tmp_path, plan).exit_code == 0  # open tools: nothing to deny
    denied = _check(tmp_path, plan, "--tools", "tests.test_cli_plan:readers_only")
    assert denied.exit_code == 1 and json.loads(denied.output)["category"] == "permission_denied"
    missing_tool = {"nodes": [{"id": "x", "tool": "delete_all", "arguments": {}}]}
    expected = Runtime("memory://", tools=TOOLS).run_plan(missing_tool).error
    unknown = _check(tmp_path, missing_tool, "--tools", "tests.test_cli_plan:TOOLS")
    assert expected is not None and unknown.exit_code == 1
    assert json.loads(unknown.output)["category"] == expected.category


def test_a_good_plan_is_ok_with_its_edges(tmp_path: Path) -> None:
    plan = {
        "nodes": [
            {"id": "a", "tool": "licence", "arguments": {"name": "globex"}},
            {"id": "w", "tool": "approve", "arguments": {"vendors": [{"$ref": "a.data.vendor"}]}},
        ]
    }
    result = _check(tmp_path, plan, "--tools", "tests.test_cli_plan:TOOLS")
    assert result.exit_code == 0 and result.output == "ok: 2 nodes, 1 edge\n"


def _refused_in_one_line(result: Any, *expected: str) -> None:
    assert result.exit_code in (1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    for part in expected:
        assert part in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("missing.json", None, "cannot read"),
        ("folder", "dir", "cannot read"),
        ("latin1.json", b'{"nodes": [{"id": "caf\xe9"}]}', "cannot read"),
        ("deep.json", b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_a_plan_file_that_cannot_be_read_is_refused_in_one_line(
    tmp_path: Path, name: str, content: bytes | str | None, expected: str
) -> None:
    _mount()
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    result = runner.invoke(app, ["plan", "check", str(path)])
    assert result.exit_code == 1, result.output
    _refused_in_one_line(result, expected, name)


@pytest.mark.parametrize(
    ("source", "attribute", "expected"),
    [
        ("x = (\n", "TOOLS", "SyntaxError"),
        ("raise RuntimeError('no credentials in this shell')\n", "TOOLS", "no credentials in this shell"),
        ("TOOLS = 5\n", "TOOLS", "neither a ToolSpec"),
    ],
)
def test_a_tools_module_that_cannot_be_used_is_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, attribute: str, expected: str
) -> None:
    _mount()
    module = f"plan_tools_{abs(hash((source, str(tmp_path)))):x}"
    (tmp_path / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = {"nodes": [{"id": "a", "tool": "licence", "arguments": {"name": "x"}}]}
    result = _check(tmp_path, plan, "--tools", f"{module}:{attribute}")
    _refused_in_one_line(result, expected)
