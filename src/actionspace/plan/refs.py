"""References from one node's arguments to another node's observation: ``{"$ref": "n1.data.items[0].id"}``.

A reference is a whole argument value (at any depth of the arguments) of the form
``{"$ref": "<node>.<path>"}``, or a placeholder inside a template string
``{"$template": "My GPA is {n1.data.gpa}"}`` (the template becomes that string; ``{{``/``}}`` are
literal braces); the path walks the referenced node's observation dict
(``data``, ``content_hash``, ``provenance.resource_version``, ``effects[0].resource_id`` …) with
``.key`` and ``[index]`` steps. Only a final, successful observation can be referenced.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from actionspace.errors import RefError, TemplateTooLarge
from actionspace.types import find_refs, template_parts

__all__ = [
    "MAX_TEMPLATE_CHARS",
    "MISSING",
    "Ref",
    "RefError",
    "TemplateTooLarge",
    "find_refs",
    "nested_past",
    "parse_ref",
    "render_value",
    "substitute",
    "template_parts",
    "walk",
]

_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_\-]*)|\[(-?\d+)\]|\[\"([^\"]*)\"\]")
_NODE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_INDEX_DIGITS: Final = 20
"""Most characters of an ``[index]`` step, its sign included (beyond any list's length, and far
below the digits Python converts to an integer)."""

MISSING = object()


@dataclass(frozen=True, slots=True)
class Ref:
    """A parsed reference: the node it points at and the path inside its observation."""

    node: str
    path: tuple[str | int, ...]
    text: str

    @property
    def top(self) -> str | None:
        """The observation field the path starts at (``data``, ``content_hash`` …)."""
        return self.path[0] if self.path and isinstance(self.path[0], str) else None


def parse_ref(text: str) -> Ref:
    """Parse ``"n1.data.items[0].id"``; raises :class:`RefError` on bad syntax."""
    if not isinstance(text, str):
        raise RefError(f"$ref must be a string, got {type(text).__name__}")
    m = _NODE.match(text)
    if m is None:
        raise RefError(f"$ref {text[:80]!r} must start with a node id")
    steps: list[str | int] = []
    pos = m.end()
    while pos < len(text):
        s = _STEP.match(text, pos)
        if s is None:
            raise RefError(f"$ref {text[:80]!r}: cannot read the path at position {pos}")
        key, index, quoted = s.groups()
        if index is not None and len(index) > _INDEX_DIGITS:  # no list is that long
            raise RefError(f"$ref {text[:80]!r}: the index at position {pos} is too long")
        steps.append(int(index) if index is not None else (key if key is not None else quoted))
        pos = s.end()
    if not steps:
        raise RefError(f"$ref {text[:80]!r} names a node but no field (e.g. {text}.data)")
    return Ref(m.group(0), tuple(steps), text)


def walk(document: Any, path: tuple[str | int, ...]) -> Any:
    """Follow ``path`` into ``document``; returns :data:`MISSING` when a step does not exist."""
    here = document
    for step in path:
        if isinstance(step, int):
            if not isinstance(here, list) or not -len(here) <= step < len(here):
                return MISSING
            here = here[step]
        elif isinstance(here, Mapping) and step in here:
            here = here[step]
        else:
            return MISSING
    return here


def nested_past(value: Any, levels: int) -> str | None:
    """The JSON pointer of the first container in ``value`` (itself level 1) nested deeper than
    ``levels``, else None. Walked without recursion, so any depth (a container holding itself
    too) is safe to look at."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:
        item, at, depth = stack.pop()
        children: Any
        if isinstance(item, Mapping):
            children = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > levels:
            return at or "/"
        for key, child in children:
            if isinstance(child, Mapping | list | tuple):
                stack.append((child, f"{at}/{key}", depth + 1))
    return None


MAX_TEMPLATE_CHARS: Final = 1_000_000
"""Longest string a ``$template`` may become (a plan's templates are the model's text: each
reference may name a result of up to the observation budget, as often as the model writes it)."""


def substitute(value: Any, resolve: Any) -> Any:
    """A copy of ``value`` with every reference replaced by ``resolve(ref_text)``.

    A template is replaced by its string, each reference formatted by :func:`render_value`; when
    ``resolve`` leaves a reference in place (answers ``{"$ref": ...}``), so does the template.
    Raises :class:`TemplateTooLarge` for a template expanding past :data:`MAX_TEMPLATE_CHARS`.
    """
    if isinstance(value, Mapping):
        if "$ref" in value and len(value) == 1:
            return resolve(value["$ref"])
        if "$template" in value and len(value) == 1 and isinstance(value["$template"], str):
            return _fill(value["$template"], resolve)
        return {k: substitute(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, resolve) for v in value]
    return value


def render_value(value: Any) -> str:
    """How a referenced value reads inside a template: strings as they are, ``true``/``false``/
    ``null`` and numbers as in JSON (``3`` for an integral float), anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _fill(text: str, resolve: Any) -> Any:
    out: list[str] = []
    size = 0
    for part, is_ref in template_parts(text):
        if not is_ref:
            out.append(part)
            size += len(part)
            continue
        value = resolve(part)
        if isinstance(value, Mapping) and set(value) == {"$ref"}:
            return {"$template": text}
        rendered = render_value(value)
        out.append(rendered)
        size += len(rendered)
        if size > MAX_TEMPLATE_CHARS:  # a short template naming a large result many times
            raise TemplateTooLarge(
                f"$template {text[:60]!r} expands past {MAX_TEMPLATE_CHARS:,} characters; "
                "reference less of the results it names"
            )
    return "".join(out)
