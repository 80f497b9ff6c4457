"""Loading the gateway's Python tools by import path, and describing tools to MCP clients."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import mcp_types as types

from actionspace.catalog.functions import spec_from_function
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError
from actionspace.runtime import TOOL_ATTRIBUTE

__all__ = ["load_python_tools", "mcp_tool"]

META_PREFIX = "actionspace/"
"""Namespace of the gateway's keys in MCP ``_meta`` objects."""


def load_python_tools(ref: str, *, pythonpath: Iterable[Path] = ()) -> list[ToolSpec]:
    """The ToolSpecs that ``module:attribute`` names; raises ConfigurationError when it names none.

    The attribute may be a ToolSpec, a function decorated with :func:`actionspace.tool`, or a
    list, tuple or dict (its values) of those. ``pythonpath`` folders are put on ``sys.path`` first.
    """
    for folder in pythonpath:
        entry = str(folder.resolve())
        if entry not in sys.path:
            sys.path.insert(0, entry)
    module_name, _, attribute = ref.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"[[tools]] {ref}: cannot import {module_name}: {exc}") from exc
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ConfigurationError(f"[[tools]] {ref}: {module_name} has no {attribute}") from exc
    items = list(target.values()) if isinstance(target, Mapping) else target
    specs = [_spec(i, ref) for i in items] if isinstance(items, list | tuple) else [_spec(items, ref)]
    if not specs:
        raise ConfigurationError(f"[[tools]] {ref}: names no tools")
    return specs


def _spec(item: Any, ref: str) -> ToolSpec:
    if isinstance(item, ToolSpec):
        return item
    options = getattr(item, TOOL_ATTRIBUTE, None)
    if callable(item) and isinstance(options, dict):
        fn: Callable[..., Any] = item
        return spec_from_function(fn, **options)
    raise ConfigurationError(f"[[tools]] {ref}: {item!r} is neither a ToolSpec nor an @tool function")


def mcp_tool(spec: ToolSpec) -> types.Tool:
    """How a governed tool is listed to MCP clients.

    The annotations come from the declared effect (and so are trustworthy, unlike an upstream
    server's own hints); ``_meta`` carries the version, schema hash, risk and whether every call
    waits for approval. No ``outputSchema`` is listed: results are the observation envelope.
    """
    mutating = spec.effect in ("write", "external")
    return types.Tool(
        name=spec.name,
        description=spec.description or spec.summary or None,
        input_schema=dict(spec.input_schema),
        annotations=types.ToolAnnotations(
            read_only_hint=not mutating,
            destructive_hint=mutating and not spec.reversible,
            idempotent_hint=not mutating,
            open_world_hint=spec.effect == "external",
        ),
        _meta={
            f"{META_PREFIX}version": spec.version,
            f"{META_PREFIX}schema_hash": spec.schema_hash,
            f"{META_PREFIX}effect": spec.effect,
            f"{META_PREFIX}risk": spec.risk,
            f"{META_PREFIX}requires_approval": spec.requires_approval,
        },
    )
