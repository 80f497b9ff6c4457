"""The Typer app every ``actionspace`` command group is made of: its help shows a flag as a flag.

Typer's help prints each option's type after its name. From typer 0.29 it prints one for a flag
too (``--json <bool>``, even ``--help <bool>``), as if the flag took a value, and ``--json true``
is then a usage error. Commands and groups made through :class:`CliApp` print a flag bare, as
typer did before; parsing is untouched (a flag still takes no value).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

__all__ = ["CliApp", "FlagCommand", "FlagGroup"]

F = TypeVar("F", bound=Callable[..., Any])


def _bare_flags(params: list[Any]) -> list[Any]:
    """``params`` with every flag's help type blank (a metavar of "" is what help prints for it)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class FlagCommand(TyperCommand):
    """A command whose help shows its flags (``--help`` among them) without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _bare_flags(super().get_params(ctx))


class FlagGroup(TyperGroup):
    """A group whose help shows its flags (``--help`` among them) without a type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _bare_flags(super().get_params(ctx))


class CliApp(typer.Typer):
    """``typer.Typer`` whose group and commands are :class:`FlagGroup` and :class:`FlagCommand`
    unless ``cls`` says otherwise."""

    def __init__(self, **options: Any) -> None:
        options.setdefault("cls", FlagGroup)
        super().__init__(**options)

    def command(self, name: str | None = None, **options: Any) -> Callable[[F], F]:
        options.setdefault("cls", FlagCommand)
        return super().command(name, **options)
