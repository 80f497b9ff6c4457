"""Typing text-valued arguments (Qwen3 XML parameters, GLM arg values) by the offered tools' schemas."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from actionspace.parse._scan import loads

__all__ = ["coerce", "index_tools", "loose"]

_INTEGER = re.compile(r"[+-]?\d+")
_TRUE_FALSE = {"true": True, "false": False}


def _name_and_schema(tool: object) -> tuple[object, object]:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping):
            return function.get("name"), function.get("parameters")
        for key in ("input_schema", "inputSchema", "parameters"):
            if key in tool:
                return tool.get("name"), tool.get(key)
        return tool.get("name"), None
    return getattr(tool, "name", None), getattr(tool, "input_schema", None)


def index_tools(tools: object) -> dict[str, Mapping[str, Any]]:
    """Tool name → the ``properties`` of its input schema.

    Accepts OpenAI tool dicts, ``{"name", "input_schema" | "inputSchema" | "parameters"}`` dicts and
    objects with ``name`` and ``input_schema`` attributes (``ToolSpec``). Entries without a name
    and an object schema (built-in tools such as web search) are skipped.
    """
    index: dict[str, Mapping[str, Any]] = {}
    if tools is None or isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        return index
    for tool in tools:
        name, schema = _name_and_schema(tool)
        if isinstance(name, str) and isinstance(schema, Mapping):
            properties = schema.get("properties")
            if isinstance(properties, Mapping):
                index.setdefault(name, properties)
    return index


def _types(schema: object) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    found: list[str] = []
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            for option in options:
                found.extend(t for t in _types(option) if t not in found)
    enum = schema.get("enum")
    if not found and isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        found.append("string")
    return found


def loose(text: str) -> Any:
    """Without a schema: the JSON value the text spells, else the text itself (``NaN`` or
    ``1e999`` spell no JSON value: they stay text)."""
    try:
        return loads(text)
    except (ValueError, RecursionError):
        return text


def _as(kind: str, text: str) -> tuple[bool, Any]:
    stripped = text.strip()
    if kind == "null":
        return stripped == "null", None
    if kind == "integer":
        if not _INTEGER.fullmatch(stripped):
            return False, None
        try:
            return True, int(stripped)
        except ValueError:  # more digits than int() converts: stays text, for validation to reject
            return False, None
    if kind == "boolean":
        lowered = stripped.lower()
        return (lowered in _TRUE_FALSE), _TRUE_FALSE.get(lowered)
    if kind in ("number", "object", "array"):
        value = loose(stripped)
        if kind == "number":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, dict if kind == "object" else list)
        return ok, value
    return False, None


def coerce(text: str, schema: object) -> Any:
    """A text-valued argument typed by its property schema.

    ``"5"`` becomes 5 for an integer property, ``"true"`` True for a boolean one, JSON text a dict
    or list for object/array; a string property keeps the text as-is. Without a usable schema the
    text is read as JSON when it is JSON, else kept. A value that fits none of the declared types
    stays a string, for validation to reject.
    """
    kinds = _types(schema)
    if not kinds:
        return loose(text)
    if "null" in kinds and text.strip() == "null":
        return None
    if "string" in kinds:
        return text
    for kind in kinds:
        ok, value = _as(kind, text)
        if ok:
            return value
    return text
