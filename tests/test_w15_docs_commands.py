"""The shell lines of the README and the guides name commands and options the CLI has.

Every ``actionspace …`` line in a ```bash block (and every command of the README's command table)
is parsed by the real command: an option renamed or removed in the code, or a sub-command that is
not there, fails here rather than in a new user's shell. Nothing is run.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from actionspace.cli import _mount, app

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = re.compile(r"```bash\n(.*?)```", re.S)
TABLE_ROW = re.compile(r"^\| `(actionspace [^|]*?)` \|", re.M)


def _lines(text: str) -> list[str]:
    """The ``actionspace`` command lines of a bash block, continuations joined, comments cut."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].split(" | ", 1)[0].strip()
        line = re.sub(r"^(\w+=\S+\s+)+", "", line)  # VAR=value before the command
        if line.startswith("actionspace "):
            found.append(line)
    return found


def _table_commands(text: str) -> list[str]:
    """The README table's ``actionspace …`` cells, each ' / '-separated form on its own."""
    _mount()
    top = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    out = []
    for cell in TABLE_ROW.findall(text):
        parts = [p.strip().strip("`") for p in cell.split("` / `")]
        group = parts[0].split()[1]
        for part in parts:
            if part.startswith("actionspace "):
                out.append(part)
            elif part.split()[0] in top:
                out.append(f"actionspace {part}")
            else:
                out.append(f"actionspace {group} {part}")
    return out


def _cases() -> list[tuple[str, str]]:
    cases = []
    for doc in DOCS:
        text = doc.read_text()
        for block in SHELL.findall(text):
            cases += [(doc.name, line) for line in _lines(block)]
        if doc.name == "README.md":
            cases += [(doc.name, line) for line in _table_commands(text)]
    return cases


def _args(line: str) -> list[str]:
    """The line's arguments, optional parts ([--json]) kept, choices (a|b) and ellipses settled."""
    line = line.replace("\\|", "|").replace("…", "X")
    line = re.sub(r"\[([^\[\]]*)\]", r"\1", line)  # [--json] → --json
    args = ["1" if a == "N" else a for a in shlex.split(line)[1:]]  # a count placeholder
    return [a.split("|", 1)[0] if a.startswith("--") is False and "|" in a else a for a in args]


def _command(args: list[str]) -> tuple[Any, list[str], list[str]]:
    """The command the arguments name (typer's own click: groups known by their ``commands``)."""
    _mount()
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    while hasattr(command, "commands") and args and not args[0].startswith("-"):
        assert args[0] in command.commands, f"no command {' '.join([*path, args[0]])!r}"
        path.append(args[0])
        command = command.commands[args[0]]
        args = args[1:]
    return command, path, args


CASES = _cases()


def test_the_docs_hold_command_lines_to_check() -> None:
    assert len(CASES) > 30
    assert {"README.md", "quickstart.md", "trace.md", "evaluation.md", "agentdojo.md"} <= {
        d for d, _ in CASES
    }


@pytest.mark.parametrize(("doc", "line"), CASES, ids=[f"{d}:{line[:60]}" for d, line in CASES])
def test_a_documented_command_line_parses(doc: str, line: str) -> None:
    command, path, args = _command(_args(line))
    if hasattr(command, "commands"):
        assert not args, f"{doc}: {line!r}: {' '.join(path)} has no command {args[0]!r}"
        return
    try:
        command.make_context(" ".join(["actionspace", *path]), list(args), resilient_parsing=False)
    except Exception as exc:
        if getattr(exc, "exit_code", None) != 2:  # a usage error: an unknown option, a missing value
            raise
        pytest.fail(f"{doc}: {line!r}: {exc.format_message()}")  # type: ignore[attr-defined]


def test_the_quickstart_trace_commands_read_what_a_runtime_on_that_store_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from actionspace import Runtime, ToolCall

    text = (ROOT / "docs" / "quickstart.md").read_text()
    block = next(b for b in SHELL.findall(text) if "trace list" in b)
    monkeypatch.chdir(tmp_path)  # sqlite:///path.db is relative to the working directory
    rt = Runtime("sqlite:///path.db")

    @rt.tool(effect="none")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    assert rt.call(ToolCall(name="add", arguments={"a": 2, "b": 3}), run_id="run-quickstart").data == 5
    rt.close()
    runner = CliRunner(
        env={"COLUMNS": "200", "ACTIONSPACE_STORE": "", "ACTIONSPACE_HOME": str(tmp_path / "h")}
    )
    lines = _lines(block)
    assert [line.split()[2] for line in lines] == ["list", "show", "export"]
    for line in lines:
        result = runner.invoke(app, _args(line.replace("RUN_ID", "run-quick")))
        assert result.exit_code == 0, f"{line}: {result.output}"
        assert "run-quickstart" in (
            result.stdout + Path("run.jsonl").read_text() if "--out" in line else result.stdout
        )


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        return [leaf for name, sub in command.commands.items() for leaf in _leaves(sub, (*path, name))]
    return [(path, command)]


def _examples() -> list[tuple[str, str]]:
    _mount()
    found = []
    for path, command in _leaves(typer.main.get_command(app)):
        if path[0] in ("ledger", "approvals"):  # their help lives with the ledger's commands
            continue
        text = f"{command.help or ''}\n{command.epilog or ''}"
        said = re.findall(r"Example: (actionspace [^\n(]*)", text)
        found.append((" ".join(path), said[0].strip() if said else ""))
    return found


@pytest.mark.parametrize(("name", "example"), _examples(), ids=[n for n, _ in _examples()])
def test_every_command_help_shows_an_example_that_parses(name: str, example: str) -> None:
    assert example.startswith(f"actionspace {name}"), f"'actionspace {name} --help' shows no example"
    command, path, args = _command(_args(example))
    assert " ".join(path) == name
    command.make_context(f"actionspace {name}", list(args), resilient_parsing=False)
