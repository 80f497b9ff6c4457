"""A schema ``default`` its own property schema refuses is never written into a call's arguments:
the tool receives only arguments its schema accepts, and the argument stays unset (the tool, or
the MCP server behind it, applies its own default) instead of holding a value no model could send."""

from __future__ import annotations

import logging
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime

PROPERTIES: list[dict[str, Any]] = [
    {"type": "integer"},
    {"type": "integer", "minimum": 0},
    {"type": "string", "enum": ["a", "b"]},
    {"type": "string", "maxLength": 2},
    {"type": "boolean"},
    {"type": "array", "items": {"type": "integer"}},
    {"anyOf": [{"type": "string"}, {"type": "null"}]},
    {"$ref": "#/$defs/Small"},
]
DEFAULTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-3, 3, allow_nan=False),
    st.sampled_from(["a", "b", "c", "abc", ""]),
    st.lists(st.one_of(st.integers(-2, 2), st.text(max_size=2)), max_size=3),
)


def _schema(prop: dict[str, Any], default: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"x": {**prop, "default": default}, "y": {"type": "string"}},
        "$defs": {"Small": {"type": "integer", "maximum": 3}},
    }


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prop=st.sampled_from(PROPERTIES), default=DEFAULTS)
def test_a_tool_never_receives_a_default_its_schema_refuses(prop: dict[str, Any], default: Any) -> None:
    schema = _schema(prop, default)
    rt = Runtime("memory://")
    got: list[dict[str, Any]] = []
    rt.add_tool(name="t", input_schema=schema, fn=lambda **kw: got.append(kw), effect="read")
    obs = rt.call({"name": "t", "arguments": {"y": "hi"}})
    assert obs.status == "ok", obs.error
    received = got[-1]
    assert jsonschema_rs.validator_for(schema).is_valid(received), received
    fits = jsonschema_rs.validator_for({"$defs": schema["$defs"], **prop}).is_valid(default)
    # a default that fits is written in, as before; one that does not is left out
    assert ("x" in received) is fits, (prop, default, received)
    if fits:
        assert received["x"] == default


def test_a_default_its_schema_refuses_is_logged_once_when_the_tool_is_registered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt = Runtime("memory://")
    got: list[int] = []
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": "nope"}}}
    with caplog.at_level(logging.WARNING, logger="actionspace"):
        rt.add_tool(name="count", input_schema=schema, fn=lambda n=3: got.append(n), effect="read")
    said = [r.getMessage() for r in caplog.records if "default" in r.getMessage()]
    assert len(said) == 1 and "count@1" in said[0] and "'n'" in said[0], said
    for _ in range(2):
        assert rt.call({"name": "count", "arguments": {}}).status == "ok"
    assert got == [3, 3]  # the function's own default: the schema's could not be sent by any model
