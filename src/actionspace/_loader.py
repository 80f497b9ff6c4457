"""``module:function`` targets named on command lines (``--tools``, ``--runtime``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from actionspace.errors import ConfigurationError

__all__ = ["load_attribute", "load_callable"]


def load_attribute(target: str, *, option: str) -> Any:
    """What ``target`` (``module:attribute``) names; ConfigurationError naming ``option`` when it is
    malformed or cannot be loaded (the module missing or failing as it is imported: a syntax
    error, an exception of its own, a missing dependency)."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ConfigurationError(f"{option} takes module:function, got {target!r}")
    try:
        return getattr(importlib.import_module(module), name)
    except Exception as exc:  # whatever the module raises as it runs is the user's mistake to fix
        raise ConfigurationError(f"cannot load {target!r} ({option}): {type(exc).__name__}: {exc}") from exc


def load_callable(target: str, *, option: str) -> Callable[..., Any]:
    """The callable ``target`` (``module:function``) names; ConfigurationError naming ``option``
    when it is malformed, cannot be imported or is not callable."""
    found = load_attribute(target, option=option)
    if not callable(found):
        raise ConfigurationError(f"{target!r} ({option}) is not callable")
    return found  # type: ignore[no-any-return]
