"""Single-fault mutations of an accepted call, each with the one error it must produce.

Every mutation changes exactly one thing, so the runtime must answer with one category and, for
argument faults, field errors at exactly one JSON pointer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from actionspace.errors import Category
from actionspace.types import ToolCall

__all__ = ["MUTATION_KINDS", "Mutation", "MutationKind", "json_pointer", "mutations"]

MutationKind = Literal["drop_required", "rename_tool", "unknown_argument", "wrong_type", "out_of_enum"]
MUTATION_KINDS: Final[tuple[MutationKind, ...]] = (
    "drop_required",
    "rename_tool",
    "unknown_argument",
    "wrong_type",
    "out_of_enum",
)

_WRONG_TYPE_PROBES: Final[tuple[Any, ...]] = ("not of the declared type", 12345, True, ["x"], {"x": 1})
"""Candidates for a value outside an argument's declared type; the first that fits none is used."""

_NONE: Final = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutation:
    """A call with one fault and the rejection it must get."""

    kind: MutationKind
    call: ToolCall
    category: Category
    path: str | None
    """The one JSON pointer every field error must name; None when the fault is not an argument."""


def json_pointer(*parts: str | int) -> str:
    """An RFC 6901 pointer to ``parts`` (``~`` and ``/`` escaped)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def mutations(
    call: ToolCall, input_schema: Mapping[str, Any], *, tool_names: Collection[str]
) -> list[Mutation]:
    """Every applicable single-fault mutation of an accepted ``call`` to a tool with ``input_schema``.

    ``tool_names`` are the tools offered beside it (a renamed tool must not hit one of them). A
    mutation that the call and schema give no material for (no required argument present, no
    typed argument, no enum) is left out; callers count what was generated.
    """
    arguments: dict[str, Any] = dict(call.arguments)
    properties: Mapping[str, Any] = input_schema.get("properties") or {}
    found: list[Mutation] = []
    for build in (_drop_required, _rename_tool, _unknown_argument, _wrong_type, _out_of_enum):
        mutation = build(call.name, arguments, properties, input_schema, tool_names)
        if mutation is not None:
            found.append(mutation)
    return found


def _drop_required(
    name: str, arguments: dict[str, Any], properties: Mapping[str, Any], schema: Mapping[str, Any], _: Any
) -> Mutation | None:
    dropped = next((r for r in schema.get("required") or () if r in arguments), None)
    if dropped is None:
        return None
    rest = {k: v for k, v in arguments.items() if k != dropped}
    return _invalid("drop_required", name, rest, json_pointer(dropped))


def _rename_tool(
    name: str, arguments: dict[str, Any], properties: Mapping[str, Any], schema: Mapping[str, Any],
    tool_names: Collection[str],
) -> Mutation:  # fmt: skip
    renamed = name + "_x"
    while renamed in tool_names:
        renamed += "_x"
    return Mutation(
        kind="rename_tool",
        call=ToolCall(name=renamed, arguments=arguments),
        category="unknown_tool",
        path=None,
    )


def _unknown_argument(
    name: str, arguments: dict[str, Any], properties: Mapping[str, Any], schema: Mapping[str, Any], _: Any
) -> Mutation:
    extra = "unexpected_argument"
    while extra in properties or extra in arguments:
        extra += "_x"
    return _invalid("unknown_argument", name, {**arguments, extra: "x"}, json_pointer(extra))


def _wrong_type(
    name: str, arguments: dict[str, Any], properties: Mapping[str, Any], schema: Mapping[str, Any], _: Any
) -> Mutation | None:
    for arg in arguments:
        declared = _types(properties.get(arg))
        if not declared:
            continue
        probe = next((p for p in _WRONG_TYPE_PROBES if not any(_has_type(p, t) for t in declared)), _NONE)
        if probe is _NONE:
            continue
        return _invalid("wrong_type", name, {**arguments, arg: probe}, json_pointer(arg))
    return None


def _out_of_enum(
    name: str, arguments: dict[str, Any], properties: Mapping[str, Any], schema: Mapping[str, Any], _: Any
) -> Mutation | None:
    present = [a for a in properties if a in arguments]
    absent = [a for a in properties if a not in arguments]
    for arg in present + absent:
        sub = properties[arg]
        if not isinstance(sub, Mapping):
            continue
        items = sub.get("items")
        if "enum" in sub:
            value = _outside(sub["enum"], _types(sub))
            if value is not _NONE:
                return _invalid("out_of_enum", name, {**arguments, arg: value}, json_pointer(arg))
        elif sub.get("type") == "array" and isinstance(items, Mapping) and "enum" in items:
            value = _outside(items["enum"], _types(items))
            if value is not _NONE:
                return _invalid("out_of_enum", name, {**arguments, arg: [value]}, json_pointer(arg, 0))
    return None


def _invalid(kind: MutationKind, name: str, arguments: dict[str, Any], path: str) -> Mutation:
    return Mutation(
        kind=kind, call=ToolCall(name=name, arguments=arguments), category="invalid_arguments", path=path
    )


def _types(schema: Any) -> tuple[str, ...]:
    if not isinstance(schema, Mapping):
        return ()
    declared = schema.get("type")
    if isinstance(declared, str):
        return (declared,)
    if isinstance(declared, list):
        return tuple(t for t in declared if isinstance(t, str))
    return ()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_type(value: Any, declared: str) -> bool:
    actual = _json_type(value)
    return actual == declared or (declared == "number" and actual == "integer")


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _outside(enum: Any, declared: tuple[str, ...]) -> Any:
    """A value of a declared type (a string when none is declared) that ``enum`` does not list."""
    if not isinstance(enum, list):
        return _NONE
    kind = declared[0] if declared else "string"
    candidates: Callable[[], Iterator[Any]] | None = _CANDIDATES.get(kind)
    if candidates is None:
        return _NONE
    return next((v for v in candidates() if not any(_json_equal(v, e) for e in enum)), _NONE)


def _strings() -> Iterator[Any]:
    return (f"not_in_enum_{i}" for i in range(100))


def _numbers() -> Iterator[Any]:
    return iter(range(987_654, 987_754))


def _booleans() -> Iterator[Any]:
    return iter((True, False))


_CANDIDATES: Final[Mapping[str, Callable[[], Iterator[Any]]]] = {
    "string": _strings,
    "integer": _numbers,
    "number": _numbers,
    "boolean": _booleans,
}
