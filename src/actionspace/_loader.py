"""``module:function`` targets named on command lines (``--tools``, ``--runtime``)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from actionspace.errors import ConfigurationError

__all__ = ["load_callable"]


def load_callable(target: str, *, option: str) -> Callable[..., Any]:
    """The callable ``target`` (``module:function``) names; ConfigurationError naming ``option``
    when it is malformed, cannot be imported or is not callable."""
    module, _, name = target.partition(":")
    if not module or not name:
        raise ConfigurationError(f"{option} takes module:function, got {target!r}")
    try:
        found = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {target!r} ({option}): {exc}") from exc
    if not callable(found):
        raise ConfigurationError(f"{target!r} ({option}) is not callable")
    return found  # type: ignore[no-any-return]
