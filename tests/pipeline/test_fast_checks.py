"""The precompiled path's argument check, decided once per tool (``_entry.checks_of``), accepts
exactly what the compiled tool's own check accepts.

For a schema whose integers are all top-level properties and which holds no date-time, the entry
asks the compiled schema alone and sends only arguments with a float among their top-level values
on to ``SettledCheck.is_valid`` (an integral float at an integer is valid for the schema but not
settled: the stages convert it). Generated schemas mix integer, number and string properties;
arguments mix ints, integral and fractional floats, bools and text.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import jsonschema_rs
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.pipeline._entry import checks_of
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
