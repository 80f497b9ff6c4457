"""The precompiled path's argument check, decided once per tool (``_entry.checks_of``), accepts
exactly what the compiled tool's own check accepts.

For a schema whose integers are all top-level properties and which holds no date-time, the entry
asks the compiled schema alone and sends only arguments with a float among their top-level values
on to ``SettledCheck.is_valid`` (an integral float at an integer is valid for the schema but not
settled: the stages convert it). Generated schemas mix integer, number and string properties;
arguments mix ints, integral and fractional floats, bools and text.

For a flat schema (``_entry.plain_of``: a closed object of required ``integer``, ``string`` and
``boolean`` properties and nothing else) the direct frame takes arguments that are exactly its
names, each of exactly its Python type, without asking either check: both must accept them.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import jsonschema_rs
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.pipeline._entry import checks_of, plain_of
from actionspace.validation.forms import SettledCheck, compile_forms
from actionspace.validation.validator import CompiledTool

NAMES = ("a", "b", "c")
KINDS = ("integer", "number", "string", ["integer", "string"], ["integer", "null"], "boolean")

values = st.one_of(
    st.integers(-5, 5),
    st.integers(-5, 5).map(float),  # integral floats: valid integers, not settled
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)


@st.composite
def schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    properties = {name: {"type": draw(st.sampled_from(KINDS))} for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    return schema


def _compiled(schema: dict[str, Any]) -> tuple[CompiledTool, Any]:
    validator = jsonschema_rs.validator_for(schema)
    forms = compile_forms(schema)
    check = validator if forms is None else SettledCheck(validator, forms)
    return cast(CompiledTool, SimpleNamespace(validator=check)), check


@settings(max_examples=300, deadline=None)
@given(schema=schemas(), args=st.dictionaries(st.sampled_from((*NAMES, "d")), values, max_size=4))
def test_the_entry_check_accepts_what_the_compiled_check_accepts(
    schema: dict[str, Any], args: dict[str, Any]
) -> None:
    compiled, full = _compiled(schema)
    check, floats = checks_of(compiled)
    quick = check(args) and not (floats and float in map(type, args.values()) and not full.is_valid(args))
    assert quick == full.is_valid(args)


def test_an_integral_float_at_an_integer_is_sent_on_and_refused() -> None:
    compiled, full = _compiled({"type": "object", "properties": {"a": {"type": "integer"}}})
    check, floats = checks_of(compiled)
    assert floats and check({"a": 2.0})  # the schema alone takes it ...
    assert not full.is_valid({"a": 2.0})  # ... the settled check does not: the stages convert it
    assert check is not full.is_valid  # the compiled schema's own check, no frame of ours


def test_a_date_time_keeps_the_settled_check() -> None:
    schema = {"type": "object", "properties": {"t": {"type": "string", "format": "date-time"}}}
    compiled, full = _compiled(schema)
    assert checks_of(compiled) == (full.is_valid, False)


PLAIN_KINDS = ("integer", "string", "boolean", "number", "null", ["integer", "string"])
EXTRA: tuple[dict[str, Any], ...] = (
    {},
    {},
    {"description": "said"},
    {"title": "T"},
    {"minimum": 0},
    {"format": "date-time"},
    {"enum": [1, "a", True]},
    {"default": 1},
    {"maxLength": 1},
)

plain_values = st.one_of(
    values,
    st.integers(),  # any size: an integer whatever its magnitude
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**30]),
)


@st.composite
def flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly flat schemas, some one keyword or one property away from one."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True))
    properties = {
        name: {"type": draw(st.sampled_from(PLAIN_KINDS)), **draw(st.sampled_from(EXTRA))} for name in names
    }
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    schema["required"] = draw(st.sampled_from([names, names, names[:-1], [*names[1:], "d"]]))
    schema.update(draw(st.sampled_from(({}, {}, {"description": "d"}, {"minProperties": 1}))))
    if draw(st.integers(0, 9)) == 0:
        schema["additionalProperties"] = draw(st.sampled_from([True, {"type": "integer"}]))
    return schema


def _plain(schema: dict[str, Any]) -> tuple[Any, Any, Any]:
    compiled, full = _compiled(schema)
    tool = SimpleNamespace(
        validator=compiled.validator, spec=SimpleNamespace(input_schema=schema), simple=True, defaults=()
    )
    return plain_of(cast(CompiledTool, tool)), compiled, full


def _taken(plain: Any, args: dict[str, Any]) -> bool:
    """The direct frame's reading (pipeline/_direct.py): exactly the names, each of exactly its type."""
    return len(args) == len(plain) and all(k in args and type(args[k]) is t for k, t in plain)


@settings(max_examples=500, deadline=None)
@given(
    schema=flat_schemas(),
    args=st.dictionaries(st.sampled_from((*NAMES, "d")), plain_values, max_size=4),
)
def test_arguments_taken_as_plain_pass_both_checks(schema: dict[str, Any], args: dict[str, Any]) -> None:
    plain, compiled, full = _plain(schema)
    if plain is None:
        return
    if not _taken(plain, args):
        return
    check, _ = checks_of(compiled)
    assert full.is_valid(args)  # the compiled tool's own (settled) check
    assert check(args)  # and the one the entry would ask
    assert not any(type(v) is float for v in args.values())  # nothing to settle, nothing non-finite


@settings(max_examples=300, deadline=None)
@given(schema=flat_schemas())
def test_only_a_flat_schema_has_plain_arguments(schema: dict[str, Any]) -> None:
    plain, _, _ = _plain(schema)
    properties = schema["properties"]
    flat = (
        schema["additionalProperties"] is False
        and "minProperties" not in schema
        and sorted(schema["required"]) == sorted(properties)
        and all(
            isinstance(sub["type"], str)
            and sub["type"] in ("integer", "string", "boolean")
            and set(sub) <= {"type", "description", "title"}
            for sub in properties.values()
        )
    )
    assert (plain is not None) == flat
    if plain is not None:
        kinds = {"integer": int, "string": str, "boolean": bool}
        assert plain == tuple((name, kinds[sub["type"]]) for name, sub in properties.items())


def test_a_tool_with_defaults_or_semantic_checks_has_no_plain_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert _plain(schema)[0] == (("a", int),)
    for simple, defaults in ((False, ()), (True, (("a", 1),))):
        tool = SimpleNamespace(spec=SimpleNamespace(input_schema=schema), simple=simple, defaults=defaults)
        assert plain_of(cast(CompiledTool, tool)) is None
