"""BFCL function docs → JSON Schema (draft 2020-12), and BFCL possible answers → concrete calls.

BFCL writes its function docs in a JSON-Schema-like dialect: ``dict`` for objects, ``float`` for
numbers, ``tuple`` for arrays, ``any`` for "no constraint", and an ``optional`` flag beside
``required``. :func:`to_input_schema` translates the dialect keyword by keyword and refuses any
keyword or type it does not know, so a new BFCL release cannot lose a constraint silently.

A possible answer lists, per argument, every acceptable value; ``""`` in that list is BFCL's marker
for "the argument may be omitted". :func:`first_answer` picks one concrete call from it (the rule is
in its docstring).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import BfclAnswerError, ToolDefinitionError
from actionspace.types import ToolCall

__all__ = ["JSON_SCHEMA_DRAFT", "BfclAnswerError", "first_answer", "to_input_schema", "to_tool_spec"]

JSON_SCHEMA_DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"

_TYPES: Final[Mapping[str, str | None]] = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "number": "number",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "tuple": "array",
    "any": None,
}
"""BFCL type name → JSON Schema type; None means the value is not constrained."""

_KEPT: Final = (
    "description",
    "enum",
    "const",
    "default",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "title",
    "examples",
)
"""Keywords whose BFCL meaning is their JSON Schema meaning: copied unchanged."""

_TRANSLATED: Final = frozenset({"type", "properties", "items", "required", "optional"})

_TRUE: Final = (True, "True", "true")
_FALSE: Final = (False, "False", "false")


def to_input_schema(parameters: Mapping[str, Any], *, where: str = "parameters") -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a BFCL ``parameters`` object.

    Every constraint BFCL states is kept; the top level also gets ``additionalProperties: false``
    (a BFCL call never carries an argument its doc does not declare). Nested objects stay open, as
    BFCL leaves them. ``optional`` is folded into ``required`` and dropped. Raises
    ToolDefinitionError for an unknown type or keyword, or when ``optional`` contradicts ``required``.
    """
    if not isinstance(parameters.get("optional", []), list):
        raise ToolDefinitionError(f"{where}: the parameters' optional must be a list of names")
    node = _node(parameters, where)
    if node.get("type") != "object":
        raise ToolDefinitionError(f"{where}: the parameters of a function must be a dict")
    node.setdefault("properties", {})
    return {"$schema": JSON_SCHEMA_DRAFT, **node, "additionalProperties": False}


def to_tool_spec(doc: Mapping[str, Any], *, fn: Callable[..., Any] | None = None) -> ToolSpec:
    """A pure (``effect="none"``) ToolSpec for one BFCL function doc; the dotted name is kept."""
    name = doc.get("name")
    if not isinstance(name, str):
        raise ToolDefinitionError(f"a BFCL function doc needs a string name, got {name!r}")
    schema = to_input_schema(doc.get("parameters") or {"type": "dict"}, where=name)
    return ToolSpec(
        name=name, description=str(doc.get("description") or ""), input_schema=schema, effect="none", fn=fn
    )


def _node(doc: Any, where: str) -> dict[str, Any]:
    if not isinstance(doc, Mapping):
        raise ToolDefinitionError(f"{where}: expected a schema object, got {type(doc).__name__}")
    unknown = sorted(set(doc) - _TRANSLATED - set(_KEPT))
    if unknown:
        raise ToolDefinitionError(f"{where}: unsupported keyword(s) {', '.join(unknown)}")
    out: dict[str, Any] = {}
    if "type" in doc:
        bfcl_type = doc["type"]
        if not isinstance(bfcl_type, str) or bfcl_type not in _TYPES:
            raise ToolDefinitionError(f"{where}: unsupported type {bfcl_type!r}")
        json_type = _TYPES[bfcl_type]
        if json_type is not None:
            out["type"] = json_type
    for key in _KEPT:
        if key in doc:
            out[key] = doc[key]
    properties = doc.get("properties")
    if properties is not None:
        if not isinstance(properties, Mapping):
            raise ToolDefinitionError(f"{where}: properties must be an object")
        out["properties"] = {str(name): _node(sub, f"{where}.{name}") for name, sub in properties.items()}
    if "items" in doc:
        out["items"] = _node(doc["items"], f"{where}[]")
    if out.get("type") == "array" and "enum" in out:
        _enum_to_items(out, where)
    required = _required(doc, where)
    if required is not None:
        out["required"] = required
    return out


def _enum_to_items(node: dict[str, Any], where: str) -> None:
    """BFCL puts the allowed values of an array's items on the array itself; JSON Schema puts them
    on ``items``. Read literally, an enum of scalars on an array rejects every array."""
    enum = node["enum"]
    if not isinstance(enum, list) or any(isinstance(v, list) for v in enum):
        return
    items = node.setdefault("items", {})
    if "enum" in items:
        raise ToolDefinitionError(f"{where}: an array and its items both carry an enum")
    items["enum"] = node.pop("enum")


def _required(doc: Mapping[str, Any], where: str) -> list[str] | None:
    """The ``required`` list, checked against every ``optional`` statement of the same object."""
    required = doc.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        raise ToolDefinitionError(f"{where}: required must be a list of names")
    names = set(required or ())
    optional = doc.get("optional")
    if isinstance(optional, list):  # an object listing its optional names; a flag is its parent's
        clash = names.intersection(optional)
        if clash:
            raise ToolDefinitionError(f"{where}: {sorted(clash)} are both required and optional")
    for name, sub in (doc.get("properties") or {}).items():
        if not isinstance(sub, Mapping) or "optional" not in sub:
            continue
        flag = sub["optional"]
        if flag in _TRUE and name in names:
            raise ToolDefinitionError(f"{where}.{name}: marked optional but listed as required")
        if flag in _FALSE and name not in names:
            raise ToolDefinitionError(f"{where}.{name}: marked not optional but not listed as required")
        if flag not in _TRUE and flag not in _FALSE:
            raise ToolDefinitionError(f"{where}.{name}: optional must be a boolean, got {flag!r}")
    return None if required is None else list(dict.fromkeys(required))


_OMIT: Final = object()


def first_answer(answer: Mapping[str, Any], functions: Sequence[Mapping[str, Any]]) -> ToolCall:
    """The concrete call a BFCL possible answer ``{name: {arg: [options…]}}`` stands for.

    Per argument the first listed option is taken, with ``""`` read as BFCL's omission marker:

    * the first option is ``""`` and the doc does not require the argument → the argument is
      omitted (BFCL accepts a call without it);
    * otherwise the first option that is not ``""`` is taken; a required argument whose only
      option is ``""`` gets the literal ``""`` (the one value BFCL's checker accepts for it);
    * for a ``dict`` argument (and a list of ``dict``) the option is itself a mapping of
      keys to option lists, read one level deep by the same rule against the nested doc's
      ``required``; deeper values are literal, as BFCL's checker compares them.

    Arguments absent from the doc are kept as given, so that the validator can report them.
    """
    if len(answer) != 1:
        raise BfclAnswerError(f"a possible answer names exactly one function, got {list(answer)}")
    ((name, options),) = answer.items()
    if not isinstance(options, Mapping):
        raise BfclAnswerError(f"{name}: the arguments of a possible answer must be an object")
    doc = next((f for f in functions if f.get("name") == name), None)
    parameters = (doc or {}).get("parameters") or {}
    return ToolCall(name=name, arguments=_pick_all(options, parameters, expand=True, where=name))


def _pick_all(
    options: Mapping[str, Any], doc: Mapping[str, Any], *, expand: bool, where: str
) -> dict[str, Any]:
    properties = doc.get("properties") or {}
    required = set(doc.get("required") or ())
    out: dict[str, Any] = {}
    for arg, choices in options.items():
        value = _pick(
            choices, arg in required, properties.get(arg) or {}, expand=expand, where=f"{where}.{arg}"
        )
        if value is not _OMIT:
            out[arg] = value
    return out


def _pick(choices: Any, required: bool, doc: Mapping[str, Any], *, expand: bool, where: str) -> Any:
    if not isinstance(choices, list) or not choices:
        raise BfclAnswerError(f"{where}: expected a non-empty list of acceptable values, got {choices!r}")
    if _is_omission(choices[0]) and not required:
        return _OMIT
    value = next((c for c in choices if not _is_omission(c)), "")
    return _expand(value, doc, where) if expand else value


def _is_omission(value: Any) -> bool:
    return isinstance(value, str) and value == ""


def _expand(value: Any, doc: Mapping[str, Any], where: str) -> Any:
    """A dict option (or list of dict options) holds option lists per key; anything else is literal."""
    bfcl_type = doc.get("type")
    if bfcl_type == "dict" and isinstance(value, Mapping):
        return _pick_all(value, doc, expand=False, where=where)
    items = doc.get("items")
    if (
        bfcl_type in ("array", "tuple")
        and isinstance(items, Mapping)
        and items.get("type") == "dict"
        and isinstance(value, list)
        and all(isinstance(v, Mapping) for v in value)
    ):
        return [_pick_all(v, items, expand=False, where=f"{where}[{i}]") for i, v in enumerate(value)]
    return value
