"""Every command ``actionspace --help`` lists is in the README's command table, so a new user who
meets a command in the help finds what it does (and its guide) in the README, and the reverse."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer

from actionspace.cli import _mount, app

README = Path(__file__).resolve().parent.parent / "README.md"
ROW = re.compile(r"^\| `(actionspace .*?)` \| .*$", re.M)


def _leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if hasattr(command, "commands"):
        return [leaf for name, sub in command.commands.items() for leaf in _leaves(sub, (*path, name))]
    return [path]


def _commands() -> list[str]:
    _mount()
    return [" ".join(path) for path in _leaves(typer.main.get_command(app))]


def _rows() -> list[str]:
    return [cell.replace("\\|", "|") for cell in ROW.findall(README.read_text())]


def _names(cell: str, name: str) -> bool:
    """Whether a row's first cell names ``name``: ``actionspace trace list` / `show RUN_ID`` names
    ``trace list`` and ``trace show`` (a form after the first may repeat the group or leave it out)."""
    group, *sub = name.split()
    if cell.removeprefix("actionspace ").split()[:1] != [group]:
        return False
    for form in cell.split("` / `"):
        words = form.removeprefix("actionspace ").split()
        words = words[1:] if words[:1] == [group] else words
        if words[: len(sub)] == sub and (sub or form.startswith("actionspace ")):
            return True
    return False


@pytest.mark.parametrize("name", _commands())
def test_every_command_in_the_help_has_a_row_in_the_readme(name: str) -> None:
    assert any(_names(cell, name) for cell in _rows()), f"README's command table has no row for {name!r}"
