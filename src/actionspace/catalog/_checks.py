"""What a tool definition is checked for before it becomes a ToolSpec: the options it names and the
defaults of its parameters. Each mistake is a ToolDefinitionError saying what to write instead."""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ToolDefinitionError, redact

__all__ = ["check_default", "check_options", "untyped"]

_OPTIONS = frozenset(f.name for f in dataclasses.fields(ToolSpec) if f.init) - {"name", "fn"}
"""What ``@rt.tool(...)`` and ``add_tool`` take besides the function: ToolSpec's fields."""


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Raise ToolDefinitionError naming an option ToolSpec has no field for (a misspelling), and
    a ``reads``/``writes`` given as one string (a list of templates was meant; each character
    would otherwise become a template)."""
    for key in options:
        if key not in _OPTIONS:
            near = difflib.get_close_matches(key, sorted(_OPTIONS), n=1)
            hint = f"did you mean {near[0]!r}?" if near else "the options are ToolSpec's fields"
            raise ToolDefinitionError(f"{name}: unknown option {key!r}; {hint}")
    for key in ("reads", "writes"):
        if isinstance(options.get(key), str):
            raise ToolDefinitionError(
                f"{name}: {key} takes a list of resource templates, not one string: "
                f"write {key}=[{options[key]!r}]"
            )


def check_default(name: str, param: str, hint: Any, default: Any) -> None:
    """Raise ToolDefinitionError for a default its own type hint refuses, or one with no JSON form.

    The schema shows the model each default as JSON; a default the hint refuses would fail every
    call that leaves the argument out as ``invalid_arguments``, blaming the model for the tool's
    definition, and one with no JSON form (NaN, an arbitrary object) cannot be shown at all.
    """
    shown = redact(repr(default))[:80]
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(hint)
        adapter.validate_python(default)
    except ValidationError as exc:
        if default is None:
            raise ToolDefinitionError(
                f"{name}: parameter {param!r} defaults to None, which its type hint does not allow; "
                f"write {param}: {_hint_text(hint)} | None = None"
            ) from exc
        why = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
        raise ToolDefinitionError(
            f"{name}: the default of parameter {param!r} ({shown}) does not fit its type hint "
            f"{_hint_text(hint)} ({why}); change the default or the hint"
        ) from exc
    except Exception:  # a hint pydantic validates only inside a model: the model already took it
        return
    try:
        json.dumps(adapter.dump_python(default, mode="json"), allow_nan=False)
    except (ValueError, TypeError, PydanticSerializationError) as exc:
        raise ToolDefinitionError(
            f"{name}: the default of parameter {param!r} ({shown}) has no JSON form, and the model "
            "reads defaults as JSON; default to a JSON value (None, a finite number, a string, a "
            "list, a dict) and derive the rest in the function"
        ) from exc


def _hint_text(hint: Any) -> str:
    """``int`` for a class, the typing repr (``list[int]``) otherwise."""
    return hint.__name__ if isinstance(hint, type) and not getattr(hint, "__args__", None) else repr(hint)


def untyped(name: str, fn: Any, param: str, *, first: bool) -> str:
    """What to do about ``param`` having no type hint: a lambda cannot carry one, and a method taken
    from its class has its ``self`` (or ``cls``) left for the model to fill."""
    if getattr(fn, "__name__", "") == "<lambda>":
        return f"{name}: a lambda cannot carry type hints (parameter {param!r}); define the tool with def"
    if first and param in ("self", "cls"):
        owner, _, method = getattr(fn, "__qualname__", "").rpartition(".")
        owner = owner.rpartition(".")[2] or "TheClass"
        return (
            f"{name}: parameter {param!r} is the method's own object, taken from the class: register the "
            f"bound method ({owner}().{method}), or make it a @staticmethod"
        )
    return f"{name}: parameter {param!r} needs a type hint (e.g. {param}: str)"
