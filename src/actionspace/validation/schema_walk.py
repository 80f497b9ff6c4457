"""Where a JSON Schema's ``x-actionspace`` markers apply inside a value.

:func:`compile_walk` turns a schema into a graph of nodes, one per subschema that can hold a value:
``properties``, ``patternProperties``, ``additionalProperties``, ``items`` (also the older list
form), ``prefixItems``, ``additionalItems``, local ``$ref`` into ``$defs`` / ``definitions``
(recursive references included), ``allOf``, ``anyOf`` and ``oneOf``. A branch of ``anyOf`` /
``oneOf`` applies to a value only when the branch's own schema accepts it, so a marker of a branch
the value does not take is never checked against it.

A marker anywhere else (under ``not``, ``if``/``then``/``else``, ``contains``, ``propertyNames``,
``dependentSchemas``, ``unevaluated*``, or behind a ``$ref`` that does not resolve here) could not
be checked, so :func:`compile_walk` raises :class:`~actionspace.errors.ConfigurationError` instead
of registering a tool whose marker would silently never run.

Walking a value (:meth:`Walk.locate`) is iterative, so arguments nested thousands deep cost time
in proportion to their size and never overflow the interpreter's stack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs

from actionspace.errors import ConfigurationError

__all__ = ["KeyMatch", "Location", "MarkerOf", "SchemaNode", "Walk", "compile_value_walk", "compile_walk"]

_DATA_KEYWORDS = frozenset({"default", "examples", "const", "enum", "description", "title", "$comment"})
"""Keywords whose values are data, not schemas: a marker-shaped value there is not a marker."""
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
"""Keywords whose values map names to schemas."""


@dataclass(eq=False, slots=True)
class SchemaNode:
    """One subschema that can hold a value."""

    marker: Mapping[str, Any] | None = None
    properties: dict[str, SchemaNode] = field(default_factory=dict)
    patterns: list[tuple[KeyMatch, SchemaNode]] = field(default_factory=list)
    additional: SchemaNode | None = None
    prefix: list[SchemaNode] = field(default_factory=list)
    items: SchemaNode | None = None
    all_of: list[SchemaNode] = field(default_factory=list)
    branches: list[tuple[Callable[[Any], bool], SchemaNode]] = field(default_factory=list)
    live: bool = False
    """True when this node or something under it carries a marker (only live nodes are walked)."""


@dataclass(frozen=True, slots=True)
class Location:
    """A value inside the arguments and the marker-bearing node that governs it."""

    segments: tuple[str | int, ...]
    value: Any
    node: SchemaNode

    @property
    def pointer(self) -> str:
        """The JSON pointer of the value."""
        return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in self.segments)


class _Ptr:
    """A pointer as a parent link, so that deep values do not copy their whole path."""

    __slots__ = ("parent", "segment")

    def __init__(self, parent: _Ptr | None, segment: str | int) -> None:
        self.parent, self.segment = parent, segment

    def segments(self) -> tuple[str | int, ...]:
        out: list[str | int] = []
        node: _Ptr | None = self
        while node is not None and node.parent is not None:
            out.append(node.segment)
            node = node.parent
        return tuple(reversed(out))


@dataclass(frozen=True, slots=True)
class Walk:
    """The compiled graph of a schema; :meth:`locate` finds every marked value of an argument set."""

    root: SchemaNode
    marked: tuple[SchemaNode, ...]
    """Every node that carries a marker."""

    def locate(self, value: Any) -> Iterator[Location]:
        """Every (location, node) of ``value`` that a marker governs, parents before children."""
        if not self.root.live:
            return
        stack: list[tuple[_Ptr, Any, list[SchemaNode]]] = [(_Ptr(None, ""), value, [self.root])]
        while stack:
            ptr, current, nodes = stack.pop()
            applying = _closure(nodes, current)
            segments: tuple[str | int, ...] | None = None
            for node in applying:
                if node.marker is not None:
                    segments = ptr.segments() if segments is None else segments
                    yield Location(segments, current, node)
            children = _children(applying, current, ptr)
            stack.extend(reversed(children))


def _closure(nodes: list[SchemaNode], value: Any) -> list[SchemaNode]:
    """The nodes that apply to one value: these, what they ``allOf``/``$ref``, and matching branches."""
    seen: set[int] = set()
    out: list[SchemaNode] = []
    todo = list(nodes)
    while todo:
        node = todo.pop()
        if id(node) in seen or not node.live:
            continue
        seen.add(id(node))
        out.append(node)
        todo.extend(node.all_of)
        todo.extend(sub for accepts, sub in node.branches if sub.live and accepts(value))
    return out


def _children(nodes: list[SchemaNode], value: Any, ptr: _Ptr) -> list[tuple[_Ptr, Any, list[SchemaNode]]]:
    out: list[tuple[_Ptr, Any, list[SchemaNode]]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            under = [sub for node in nodes for sub in _property_nodes(node, str(key))]
            if under:
                out.append((_Ptr(ptr, str(key)), item, under))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            under = [sub for node in nodes for sub in _item_nodes(node, index)]
            if under:
                out.append((_Ptr(ptr, index), item, under))
    return out


def _property_nodes(node: SchemaNode, key: str) -> list[SchemaNode]:
    found = [node.properties[key]] if key in node.properties else []
    found.extend(sub for matches, sub in node.patterns if matches(key))
    if not found and node.additional is not None:
        found.append(node.additional)
    return [n for n in found if n.live]


def _item_nodes(node: SchemaNode, index: int) -> list[SchemaNode]:
    sub = node.prefix[index] if index < len(node.prefix) else node.items
    return [sub] if sub is not None and sub.live else []


# ---------------------------------------------------------------------------------- compiling


KeyMatch = Callable[[str], bool]
"""Whether an argument key matches one ``patternProperties`` pattern."""


def _key_match(pattern: str) -> KeyMatch:
    """The test of ``pattern`` against a key, as the schema's validator reads it (ECMA-262, in
    bounded time). A key is the model's text: a backtracking engine such as ``re`` would spend
    exponential time on a key crafted against ``^(a+)+$``, and its ``$`` also matches before a
    final newline, so it would apply a subschema the validator never applied."""
    try:
        return jsonschema_rs.validator_for({"type": "string", "pattern": pattern}, offline=True).is_valid
    except ValueError as exc:  # jsonschema_rs.ValidationError is one
        raise ConfigurationError(f"patternProperties {pattern!r} is not a valid pattern: {exc}") from exc


MarkerOf = Callable[[Mapping[str, Any]], "Mapping[str, Any] | None"]
"""What a subschema marks (None: nothing), read once per subschema when a walk is compiled."""


class _Compiler:
    def __init__(self, schema: Mapping[str, Any], marker_of: MarkerOf) -> None:
        self.schema = schema
        self.marker_of = marker_of
        self.defs: dict[str, Any] = {}
        for key in ("definitions", "$defs"):
            found = schema.get(key)
            if isinstance(found, Mapping):
                self.defs.update(found)
        self.nodes: dict[int, SchemaNode] = {}
        self.sources: list[Any] = []  # keeps compiled mappings alive so their ids stay unique
        self.unresolved: list[str] = []

    def node(self, sub: Any) -> SchemaNode:
        if not isinstance(sub, Mapping):
            return SchemaNode()  # ``true`` / ``false`` schemas hold no marker
        known = self.nodes.get(id(sub))
        if known is not None:
            return known
        node = SchemaNode()
        self.nodes[id(sub)] = node
        self.sources.append(sub)
        self._fill(node, sub)
        return node

    def _fill(self, node: SchemaNode, sub: Mapping[str, Any]) -> None:
        node.marker = self.marker_of(sub)
        ref = sub.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            if target is None:
                self.unresolved.append(ref)
            else:
                node.all_of.append(self.node(target))
        for name, value in _mapping(sub.get("properties")).items():
            node.properties[str(name)] = self.node(value)
        for pattern, value in _mapping(sub.get("patternProperties")).items():
            node.patterns.append((_key_match(str(pattern)), self.node(value)))
        if isinstance(sub.get("additionalProperties"), Mapping):
            node.additional = self.node(sub["additionalProperties"])
        self._fill_items(node, sub)
        node.all_of.extend(self.node(s) for s in _list(sub.get("allOf")))
        for key in ("anyOf", "oneOf"):
            for branch in _list(sub.get(key)):
                node.branches.append((self._accepts(branch), self.node(branch)))

    def _fill_items(self, node: SchemaNode, sub: Mapping[str, Any]) -> None:
        items = sub.get("items")
        if isinstance(items, list):  # the older tuple form: items positional, additionalItems after
            node.prefix = [self.node(s) for s in items]
            if isinstance(sub.get("additionalItems"), Mapping):
                node.items = self.node(sub["additionalItems"])
            return
        node.prefix = [self.node(s) for s in _list(sub.get("prefixItems"))]
        if isinstance(items, Mapping):
            node.items = self.node(items)

    def _resolve(self, ref: str) -> Any:
        if ref == "#":
            return self.schema
        for prefix in ("#/$defs/", "#/definitions/"):
            if ref.startswith(prefix):
                name = ref[len(prefix) :].replace("~1", "/").replace("~0", "~")
                return self.defs.get(name)
        return None

    def _accepts(self, branch: Any) -> Callable[[Any], bool]:
        """A test of whether ``branch`` alone accepts a value (built only if the branch is walked)."""
        holder: list[Any] = []
        defs = {k: self.schema[k] for k in ("$defs", "definitions") if k in self.schema}

        def accepts(value: Any) -> bool:
            if not holder:
                if not isinstance(branch, Mapping):
                    holder.append(None)
                else:
                    holder.append(jsonschema_rs.validator_for({**defs, **branch}, offline=True))
            validator = holder[0]
            return bool(branch) if validator is None else bool(validator.is_valid(value))

        return accepts


def compile_walk(schema: Mapping[str, Any], marker_key: str) -> Walk:
    """The walk of ``schema``'s markers; raises ConfigurationError for a marker it cannot reach."""

    def marker_of(sub: Mapping[str, Any]) -> Mapping[str, Any] | None:
        marker = sub.get(marker_key)
        return marker if isinstance(marker, Mapping) and "type" in marker else None

    compiler, root, nodes = _compiled(schema, marker_of)
    reached = set(compiler.nodes)
    stray = [m for m in _markers(schema, marker_key) if id(m) not in reached]
    if stray:
        raise ConfigurationError(
            f"{len(stray)} {marker_key} marker(s) sit where values are not checked (under not, if/then/else, "
            f"contains, propertyNames, dependentSchemas or unevaluated*); first: {dict(stray[0][marker_key])}"
        )
    if compiler.unresolved and any(n.marker is not None for n in nodes):
        raise ConfigurationError(
            f"$ref {compiler.unresolved[0]!r} does not resolve inside the schema, so its "
            f"{marker_key} markers could not be checked"
        )
    return Walk(root=root, marked=tuple(n for n in nodes if n.marker is not None))


def compile_value_walk(schema: Mapping[str, Any], marker_of: MarkerOf) -> Walk:
    """The walk of what ``marker_of`` finds in ``schema`` (a ``type``, a ``format``), wherever a
    value can take it. Unlike :func:`compile_walk`, a mark no value reaches (under ``not``, behind
    a ``$ref`` that does not resolve) is no error: it governs nothing, so a value there is left as
    written. Raises ConfigurationError only as :func:`compile_walk` does for the same schema (a
    ``patternProperties`` pattern that is not a valid regular expression)."""
    _, root, nodes = _compiled(schema, marker_of)
    return Walk(root=root, marked=tuple(n for n in nodes if n.marker is not None))


def _compiled(
    schema: Mapping[str, Any], marker_of: MarkerOf
) -> tuple[_Compiler, SchemaNode, list[SchemaNode]]:
    compiler = _Compiler(schema, marker_of)
    root = compiler.node(schema)
    for definition in compiler.defs.values():  # unreferenced definitions hold no reachable value
        compiler.node(definition)
    nodes = list(compiler.nodes.values())
    _mark_live(nodes)
    return compiler, root, nodes


def _mark_live(nodes: list[SchemaNode]) -> None:
    for node in nodes:
        node.live = node.marker is not None
    changed = True
    while changed:
        changed = False
        for node in nodes:
            if node.live:
                continue
            subs = [
                *node.properties.values(),
                *(s for _, s in node.patterns),
                *node.prefix,
                *node.all_of,
                *(s for _, s in node.branches),
            ]
            subs.extend(s for s in (node.additional, node.items) if s is not None)
            if any(s.live for s in subs):
                node.live = changed = True


def _markers(schema: Any, marker_key: str) -> Iterator[Mapping[str, Any]]:
    """Every subschema of ``schema`` that carries a marker, wherever it sits."""
    stack: list[Any] = [schema]
    while stack:
        sub = stack.pop()
        if isinstance(sub, list):
            stack.extend(sub)
            continue
        if not isinstance(sub, Mapping):
            continue
        if isinstance(sub.get(marker_key), Mapping):
            yield sub
        for key, value in sub.items():
            if key in _DATA_KEYWORDS or key == marker_key:
                continue
            if key in _SCHEMA_MAPS and isinstance(value, Mapping):
                stack.extend(value.values())
            else:
                stack.append(value)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []
