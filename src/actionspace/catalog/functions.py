"""Turn a typed Python function into a ToolSpec: JSON Schema from type hints and docstring."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, create_model

from actionspace.catalog._checks import check_default, check_options, untyped
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError, ToolDefinitionError, redact

__all__ = [
    "RESERVED_PARAMETERS",
    "TOOL_ATTRIBUTE",
    "ToolSource",
    "Toolset",
    "as_spec",
    "spec_from_function",
    "spec_from_schema",
    "tool",
]

F = TypeVar("F", bound=Callable[..., Any])

TOOL_ATTRIBUTE = "__actionspace_tool__"
"""Where :func:`tool` keeps a function's ToolSpec options until a Runtime registers it."""


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(fn: None = None, /, **spec: Any) -> Callable[[F], F]: ...


def tool(fn: F | None = None, /, **spec: Any) -> F | Callable[[F], F]:
    """Mark a typed function as a tool, to be registered later (``Runtime(tools=[f])``).

    Takes the same options as :meth:`Runtime.tool`; ``effect`` is required. The function itself
    is returned unchanged, so it stays callable and testable on its own.
    """

    def mark(f: F) -> F:
        setattr(f, TOOL_ATTRIBUTE, dict(spec))
        return f

    return mark(fn) if fn is not None else mark


class Toolset(Protocol):
    """Tools from elsewhere (an MCP server) that register themselves in a runtime and close."""

    def register(self, rt: Any) -> Any: ...

    async def aregister(self, rt: Any) -> Any: ...

    def close(self) -> None: ...


TS = TypeVar("TS", bound=Toolset)
TS_co = TypeVar("TS_co", bound=Toolset, covariant=True)


class ToolSource(Protocol[TS_co]):
    """Something that opens a :class:`Toolset` (``StdioServer``, ``HttpServer``)."""

    def toolset(self) -> TS_co: ...


RESERVED_PARAMETERS = frozenset({"idempotency_key", "transaction"})
"""Parameters the runtime fills in itself; never part of the schema the model sees."""

_JSON_NATIVE = (str, int, float, bool, type(None))


def spec_from_function(fn: Callable[..., Any], **options: Any) -> ToolSpec:
    """Build a ToolSpec for ``fn``; ``options`` are ToolSpec fields (``effect`` is required)."""
    if "effect" not in options:
        raise ToolDefinitionError(
            f"{getattr(fn, '__name__', fn)!r}: declare effect= ('none', 'read', 'write' or 'external')"
        )
    name = options.pop("name", None) or getattr(fn, "__name__", "")
    if not name:
        raise ToolDefinitionError(f"{fn!r} has no __name__: register it with name='...'")
    check_options(name, options)
    doc = inspect.getdoc(fn) or ""
    summary, description, params_doc = _split_docstring(doc)
    model = _arguments_model(fn, name, params_doc)
    try:
        schema = _hide_secret_defaults(_clean_schema(model.model_json_schema()))
    except Exception as exc:  # a parameter type pydantic validates but cannot describe (a callable)
        raise ToolDefinitionError(f"{name}: cannot describe the arguments as JSON Schema: {exc}") from exc
    options.setdefault("description", description)
    options.setdefault("summary", summary)
    options.setdefault("input_schema", schema)
    if "output_schema" not in options:
        options["output_schema"] = _output_schema(fn)
    if "coerce" not in options and _needs_coercion(model):
        options["coerce"] = _coercer(model)
    return ToolSpec(name=name, fn=fn, **options)


def spec_from_schema(
    name: str, input_schema: Mapping[str, Any], fn: Callable[..., Any], **options: Any
) -> ToolSpec:
    """A ToolSpec for a tool known by its JSON Schema; ``options`` are ToolSpec fields.

    Raises ConfigurationError when ``effect`` is not among them.
    """
    if "effect" not in options:
        raise ConfigurationError(f"{name}: declare effect= ('none', 'read', 'write' or 'external')")
    if not isinstance(input_schema, Mapping):
        raise ToolDefinitionError(
            f"{name}: input_schema must be a JSON Schema object (a dict such as "
            f"{{'type': 'object', 'properties': {{...}}}}), got {type(input_schema).__name__}"
        )
    check_options(name, options)
    return ToolSpec(name=name, input_schema=dict(input_schema), fn=fn, **options)


def as_spec(item: ToolSpec | Callable[..., Any]) -> ToolSpec:
    """``item`` itself, or the ToolSpec of a function decorated with :func:`tool`.

    Raises ConfigurationError for anything else, and for a ToolSpec with no implementation (``fn``).
    """
    if not isinstance(item, ToolSpec):
        options = getattr(item, TOOL_ATTRIBUTE, None)
        if options is None:
            raise ConfigurationError(f"{item!r} is neither a ToolSpec nor decorated with @tool")
        item = spec_from_function(item, **options)
    if item.fn is None:
        raise ConfigurationError(f"{item.key}: a tool needs an implementation (fn=)")
    return item


def _output_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """JSON Schema of the return annotation when it describes plain data; None otherwise.

    Used to check plan references (``{"$ref": "n1.data.total"}``) against the argument they feed.
    Unannotated, ``Any``/``object``/``None`` returns, ``ToolResult`` and generators give None.
    """
    try:
        annotation = get_type_hints(_annotated(fn)).get("return")
    except Exception:
        return None
    if annotation is None or annotation in (Any, object, type(None)):
        return None
    origin = getattr(annotation, "__origin__", None)
    if inspect.isclass(annotation) and annotation.__name__ == "ToolResult":
        return None
    if origin is not None and getattr(origin, "__name__", "") in (
        "Generator",
        "AsyncGenerator",
        "Iterator",
        "AsyncIterator",
        "Iterable",
        "AsyncIterable",
        "Awaitable",
        "Coroutine",
    ):
        return None
    try:
        return _clean_schema_any(TypeAdapter(annotation).json_schema())
    except Exception:
        return None


def _clean_schema_any(schema: dict[str, Any]) -> dict[str, Any]:
    cleaned = _clean_schema(dict(schema))
    if schema.get("type") != "object" and "properties" not in schema:
        cleaned.pop("properties", None)
    return cleaned


def _annotated(fn: Callable[..., Any]) -> Any:
    """The object whose annotations describe ``fn``'s parameters: the function under a
    ``functools.partial``, the ``__call__`` of a callable instance, ``fn`` itself otherwise."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    return type(fn).__call__


def _fixed_by_partial(fn: Callable[..., Any]) -> frozenset[str]:
    """Keywords a ``functools.partial`` binds: fixed by whoever registered it, not the model's."""
    fixed: set[str] = set()
    while isinstance(fn, functools.partial):
        fixed.update(fn.keywords)
        fn = fn.func
    return frozenset(fixed)


def _type_hints(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    try:
        return get_type_hints(_annotated(fn), include_extras=True)
    except NameError as exc:
        raise ToolDefinitionError(
            f"{name}: cannot resolve type hints: {exc}; import that name at run time "
            "(not only under TYPE_CHECKING) in the function's module"
        ) from exc
    except Exception as exc:
        raise ToolDefinitionError(f"{name}: cannot resolve type hints: {exc}") from exc


def _parameters(fn: Callable[..., Any], name: str) -> list[inspect.Parameter]:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(
            f"{name}: its signature cannot be read ({exc}); wrap it in a typed def and register that"
        ) from exc
    fixed = _fixed_by_partial(fn)
    out = []
    for param in params:
        if param.name in RESERVED_PARAMETERS or param.name in fixed:
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{name}: *args/**kwargs cannot be described to a model; declare named parameters "
                "(or use add_tool with an explicit input_schema)"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{name}: positional-only parameter {param.name!r} cannot be passed by keyword; "
                "drop the '/' or wrap the function in a def with named parameters"
            )
        out.append(param)
    return out


def _field_name(param: str, taken: set[str]) -> str:
    """A name pydantic accepts for ``param`` (which stays the alias the model sees and sends)."""
    if not (param.startswith(("_", "model_")) or hasattr(BaseModel, param)):
        return param
    base = f"arg_{param.lstrip('_')}"
    candidate, n = base, 0
    while candidate in taken:
        n += 1
        candidate = f"{base}_{n}"
    return candidate


def _arguments_model(fn: Callable[..., Any], name: str, params_doc: Mapping[str, str]) -> type[BaseModel]:
    hints = _type_hints(fn, name)
    params = _parameters(fn, name)
    taken = {p.name for p in params}
    fields: dict[str, Any] = {}
    for param in params:
        if param.name not in hints:
            raise ToolDefinitionError(untyped(name, _annotated(fn), param.name, first=param is params[0]))
        default = ... if param.default is param.empty else param.default
        field_name = _field_name(param.name, taken)
        taken.add(field_name)
        alias = param.name if field_name != param.name else None
        info = Field(default, alias=alias, description=params_doc.get(param.name))
        fields[field_name] = (hints[param.name], info)
    try:
        model: type[BaseModel] = create_model(
            f"{name}_arguments",
            __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
    except Exception as exc:
        raise ToolDefinitionError(f"{name}: cannot build an argument model: {exc}") from exc
    for param in params:
        if param.default is not param.empty:
            check_default(name, param.name, hints[param.name], param.default)
    return model


def _needs_coercion(model: type[BaseModel]) -> bool:
    """True when some parameter's Python value differs from its JSON value (datetime, models…)."""
    for field in model.model_fields.values():
        annotation = field.annotation
        if annotation not in _JSON_NATIVE or field.metadata:
            return True
    return False


def _coercer(model: type[BaseModel]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    names = tuple((field, info.alias or field) for field, info in model.model_fields.items())

    def coerce(args: Mapping[str, Any]) -> dict[str, Any]:
        # Raises pydantic.ValidationError; the validator turns it into invalid_arguments.
        instance = model.model_validate(dict(args))
        given = instance.model_fields_set
        return {param: getattr(instance, field) for field, param in names if param in args or field in given}

    return coerce


def coercion_errors(exc: ValidationError) -> list[tuple[str, str]]:
    """(JSON pointer, message) for each error of a failed coercion."""
    out = []
    for err in exc.errors():
        pointer = "".join(f"/{part}" for part in err.get("loc", ()))
        out.append((pointer, str(err.get("msg", "invalid value"))))
    return out


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles (noise for a model), keep everything else."""

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if key == "title" and not in_properties and isinstance(value, str):
                    continue
                out[key] = clean(value, in_properties=(key in ("properties", "$defs") and not in_properties))
            return out
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    cleaned.setdefault("properties", {})
    return cleaned


_MASK = "**********"
"""How pydantic writes a ``SecretStr``/``SecretBytes`` value into a JSON Schema."""
_BRANCHES = ("anyOf", "oneOf", "allOf")


def _hide_secret_defaults(schema: Any) -> Any:
    """``schema`` without the ``default`` of any property that holds a credential: a secret type
    (``SecretStr``, ``SecretBytes``: ``writeOnly`` or ``format: password``, in the node or one of
    its branches) or a default with a credential in it (:func:`~actionspace.errors.redact` would
    change it, or pydantic's mask of a secret). The function keeps its default: the model, which
    never sees it, leaves the argument out and the tool gets the default."""
    if isinstance(schema, list):
        return [_hide_secret_defaults(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _hide_secret_defaults(value) for key, value in schema.items()}
    if "default" in out and (_secret_typed(out) or _holds_credential(out["default"])):
        del out["default"]
    return out


def _secret_typed(node: Mapping[str, Any]) -> bool:
    if node.get("writeOnly") is True or node.get("format") == "password":
        return True
    branches = [branch for key in _BRANCHES if isinstance(found := node.get(key), list) for branch in found]
    return any(isinstance(branch, Mapping) and _secret_typed(branch) for branch in branches)


def _holds_credential(value: Any) -> bool:
    if isinstance(value, str):
        return value == _MASK or redact(value) != value
    if isinstance(value, Mapping):
        return any(_holds_credential(item) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_holds_credential(item) for item in value)
    return False


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?):\s*$")
_PARAM_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^:param\s+(?:\S+\s+)?(\w+):\s*(.*)$")
_RULE = re.compile(r"^-{3,}$")
_NUMPY_PARAM_LINE = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_NUMPY_PARAMETERS = frozenset({"Parameters", "Other Parameters", "Arguments", "Args", "Params"})


def _split_docstring(doc: str) -> tuple[str, str, dict[str, str]]:
    """(summary line, description without parameter sections, {param: description}).

    Reads Google (``Args:``), NumPy (``Parameters`` over a ``----------`` rule) and reST
    (``:param name:``) styles.
    """
    lines = doc.splitlines()
    params: dict[str, str] = {}
    body: list[str] = []
    section: str | None = None
    current: str | None = None
    numpy = False
    skip_rule = False
    for index, line in enumerate(lines):
        stripped = line.strip()
        if skip_rule:
            skip_rule = False
            continue
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        header = _SECTION.match(stripped)
        sphinx = _SPHINX_PARAM.match(stripped)
        if stripped and _RULE.match(following) and not line.startswith((" ", "\t")):
            section, current, numpy, skip_rule = stripped, None, True, True
            continue
        if header:
            section, current, numpy = header.group(1), None, False
            continue
        if sphinx:
            current = sphinx.group(1)
            params[current] = sphinx.group(2).strip()
            continue
        if numpy and section in _NUMPY_PARAMETERS:
            current = _numpy_parameter(line, stripped, current, params)
            continue
        if section in ("Args", "Arguments", "Parameters", "Params"):
            match = _PARAM_LINE.match(line)
            if match and (line.startswith((" ", "\t")) or not current):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif stripped and current:
                params[current] = f"{params[current]} {stripped}".strip()
            elif not stripped:
                current = None
            continue
        if section is None and not stripped.startswith(":"):
            body.append(line)
    description = "\n".join(body).strip()
    summary = description.splitlines()[0].strip() if description else ""
    return summary, description, params


def _numpy_parameter(line: str, stripped: str, current: str | None, params: dict[str, str]) -> str | None:
    """Read one line of a NumPy ``Parameters`` section: ``name : type`` opens a parameter, the
    indented lines under it describe it. Returns the parameter being described."""
    if not stripped:
        return current
    if not line.startswith((" ", "\t")):
        match = _NUMPY_PARAM_LINE.match(stripped)
        if match is None:
            return None
        params[match.group(1)] = ""
        return match.group(1)
    if current is not None:
        params[current] = f"{params[current]} {stripped}".strip()
    return current
