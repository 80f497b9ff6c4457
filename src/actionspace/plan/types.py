"""Type checks of plan references against the schemas on both ends, before anything runs.

A reference ``{"$ref": "n1.data.total"}`` that is a whole top-level argument is checked when the
source tool declares an ``output_schema`` (Python tools get one from their return annotation):
the path must exist where the schema is closed, and the JSON types at both ends must overlap.
Anything the schemas leave open is checked at run time by the tool's own validation, and so is
a ``number`` feeding an ``integer`` (the types overlap: ``3.0`` is an integer, ``3.5`` is not).
A ``$template`` argument is a string built from scalar references (:func:`template_mismatch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.plan.refs import Ref

__all__ = ["reference_mismatch", "template_mismatch"]

_OPEN: frozenset[str] = frozenset()


def reference_mismatch(ref: Ref, source: ToolSpec, target: ToolSpec, argument: str) -> str | None:
    """Why ``ref`` cannot feed ``target``'s ``argument``; None when it can (or nobody can tell)."""
    if ref.top != "data" or source.output_schema is None:
        return None
    found = _at(source.output_schema, ref.path[1:], source.output_schema)
    if isinstance(found, str):
        return found
    if found is None:
        return None
    wanted = target.input_schema.get("properties", {}).get(argument)
    if not isinstance(wanted, Mapping):
        return None
    have, need = _types(found, source.output_schema), _types(wanted, target.input_schema)
    if not have or not need:
        return None
    if have & {"integer", "number"}:
        # integer ⊂ number, and a number may hold an integral value: the tool's validation decides
        have = have | {"number", "integer"}
    if have & need:
        return None
    return (
        f"{ref.text} is {'/'.join(sorted(have))} in {source.name}'s output, but {target.name}.{argument} "
        f"needs {'/'.join(sorted(need))}"
    )


def template_mismatch(
    refs: Sequence[Ref], sources: Mapping[str, ToolSpec], target: ToolSpec, argument: str
) -> str | None:
    """Why a ``$template`` cannot feed ``target``'s ``argument``; None when it can (or nobody can tell).

    The template is a string, so the argument must accept one; each reference must exist in its
    source's output schema and hold a scalar (an object or array has no one way to read as text).
    """
    wanted = target.input_schema.get("properties", {}).get(argument)
    if isinstance(wanted, Mapping):
        need = _types(wanted, target.input_schema)
        if need and "string" not in need:
            return f"a $template is a string, but {target.name}.{argument} needs {'/'.join(sorted(need))}"
    for ref in refs:
        source = sources.get(ref.node)
        if source is None or ref.top != "data" or source.output_schema is None:
            continue
        found = _at(source.output_schema, ref.path[1:], source.output_schema)
        if isinstance(found, str):
            return f"{ref.text}: {found}"
        have = _types(found, source.output_schema) if found is not None else _OPEN
        if have and not have - {"object", "array"}:
            return (
                f"{ref.text} is {'/'.join(sorted(have))} in {source.name}'s output; a template holds scalars"
            )
    return None


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    seen = 0
    while isinstance(schema, Mapping) and "$ref" in schema and seen < 16:
        pointer = str(schema["$ref"])
        if not pointer.startswith("#/"):
            return None
        node: Any = root
        for part in pointer[2:].split("/"):
            node = node.get(part) if isinstance(node, Mapping) else None
        schema, seen = node, seen + 1
    return schema


def _at(schema: Any, path: tuple[str | int, ...], root: Mapping[str, Any]) -> Mapping[str, Any] | str | None:
    """The sub-schema at ``path``; a string when the path cannot exist; None when open."""
    here = _resolve(schema, root)
    for step in path:
        if not isinstance(here, Mapping):
            return None
        if isinstance(step, int):
            items = here.get("items")
            if items is None:
                return (
                    None
                    if here.get("type") in (None, "array")
                    else f"cannot index [{step}] into {here.get('type')}"
                )
            here = _resolve(items, root)
            continue
        props = here.get("properties")
        if isinstance(props, Mapping) and step in props:
            here = _resolve(props[step], root)
            continue
        extra = here.get("additionalProperties")
        if extra is False:
            return f"the output has no field {step!r}"
        if isinstance(extra, Mapping):
            here = _resolve(extra, root)
            continue
        if here.get("type") not in (None, "object"):
            return f"cannot take field {step!r} of {here.get('type')}"
        return None
    return here if isinstance(here, Mapping) else None


def _types(schema: Mapping[str, Any], root: Mapping[str, Any]) -> frozenset[str]:
    schema = _resolve(schema, root) or {}
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(str(k) for k in kind)
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            out: set[str] = set()
            for option in options:
                sub = _types(option, root) if isinstance(option, Mapping) else _OPEN
                if not sub:
                    return _OPEN
                out |= sub
            return frozenset(out)
    return _OPEN
