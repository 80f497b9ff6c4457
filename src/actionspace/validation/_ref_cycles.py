"""Reference loops that never read deeper into the value: ``A`` is ``B`` and ``B`` is ``A``.

A ``$ref`` (or ``allOf``, ``anyOf``, ``oneOf``, ``not``, ``if``/``then``/``else``,
``dependentSchemas``) applies its target to the *same* value. A chain of them that comes back to
where it began without passing through ``properties``, ``items`` or any other keyword that steps
into a part of the value defines nothing: one validator accepts every value there, another
recurses until it fails. Either way the constraints the author wrote are not the ones checked, so
such a schema is refused when its tool is registered. Recursion that steps into the value (a tree
whose ``children`` items refer back to the node) is a schema like any other.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["reference_loop"]

_SAME_VALUE_LISTS = ("allOf", "anyOf", "oneOf")
_SAME_VALUE_ONE = ("not", "if", "then", "else")
_DATA_KEYWORDS = frozenset({"default", "examples", "const", "enum"})
_LEAVES = frozenset({str, int, float, bool, type(None)})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


def reference_loop(schema: Mapping[str, Any]) -> list[str] | None:
    """The ``$ref`` values of one loop of ``schema`` that applies a subschema to the value it is
    already checking and comes back to itself, in order; None when there is none. Only local
    references (``#`` and JSON pointers after it) are followed. Iterative: any depth of schema."""
    nodes = {id(sub): sub for sub in _subschemas(schema)}
    state: dict[int, int] = {}  # 1: on the current path, 2: finished
    for start in nodes:
        if state.get(start):
            continue
        path: list[tuple[int, str]] = [(start, "")]
        stack: list[Iterator[tuple[Any, str]]] = [_same_value(nodes[start], schema)]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                state[path.pop()[0]] = 2
                continue
            target, via = step
            key = id(target)
            if key not in nodes:  # a pointer to no schema (into a map of names): nothing applied
                continue
            if state.get(key) == 1:
                at = next(i for i, (node, _) in enumerate(path) if node == key)
                return [hop for _, hop in path[at + 1 :] if hop] + ([via] if via else [])
            if state.get(key) == 2:
                continue
            state[key] = 1
            path.append((key, via))
            stack.append(_same_value(target, schema))
    return None


def _same_value(sub: Mapping[str, Any], root: Mapping[str, Any]) -> Iterator[tuple[Any, str]]:
    """The subschemas ``sub`` applies to the value it checks, each with the ``$ref`` that led
    there (``""`` for an in-place keyword)."""
    ref = sub.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if isinstance(target, Mapping):
            yield target, ref
    for key in _SAME_VALUE_LISTS:
        members = sub.get(key)
        for member in members if isinstance(members, list) else ():
            if isinstance(member, Mapping):
                yield member, ""
    for key in _SAME_VALUE_ONE:
        if isinstance(sub.get(key), Mapping):
            yield sub[key], ""
    dependent = sub.get("dependentSchemas")
    if isinstance(dependent, Mapping):
        yield from ((value, "") for value in dependent.values() if isinstance(value, Mapping))


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None  # a remote or anchor reference: the compiled validator judged it
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _subschemas(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every subschema of ``schema``: not the data keywords' values (a default or an enum holds
    no schema), nor the maps of names to schemas themselves (a property may be named ``not``)."""
    stack: list[Any] = [schema]
    while stack:
        sub = stack.pop()
        if type(sub) is list:
            stack.extend(sub)
        elif type(sub) is dict or isinstance(sub, Mapping):
            yield sub
            for key, value in sub.items():
                if type(value) in _LEAVES or key in _DATA_KEYWORDS:
                    continue  # no schema inside (the common case, checked without an ABC)
                if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                    stack.extend(value.values())
                else:
                    stack.append(value)
