"""A tool schema whose ``$ref`` chain comes back to itself without stepping into the value
(``A`` is ``B``, ``B`` is ``A``) is refused when the tool is registered: it constrains nothing,
so the validator accepted any value there and the tool received whatever the model wrote."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError

LOOPS: dict[str, dict[str, Any]] = {
    "two definitions": {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}},
    "itself": {"$defs": {"A": {"$ref": "#/$defs/A", "type": "integer"}}},
    "through allOf": {
        "definitions": {"A": {"allOf": [{"$ref": "#/definitions/B"}]}, "B": {"$ref": "#/definitions/A"}}
    },
    "through anyOf": {"$defs": {"A": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/A"}]}}},
}


def _schema(defs: dict[str, Any]) -> dict[str, Any]:
    first = next(iter(next(iter(defs.values()))))
    kind = next(iter(defs))
    return {"type": "object", **defs, "properties": {"amount": {"$ref": f"#/{kind}/{first}"}}}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_a_reference_loop_that_never_steps_into_the_value_is_refused_at_registration(name: str) -> None:
    rt = Runtime("memory://")
    sent: list[Any] = []
    schema = _schema(LOOPS[name])
    with pytest.raises(ConfigurationError, match="refers back to itself"):
        rt.add_tool(name="pay", input_schema=schema, fn=lambda **kw: sent.append(kw), effect="write")
    assert "pay" not in {spec.name for spec in rt.catalog}
    unknown = rt.call({"name": "pay", "arguments": {"amount": "everything"}}).error
    assert unknown is not None and unknown.category == "unknown_tool"
    assert sent == []


@settings(max_examples=40, deadline=None)
@given(
    depth=st.integers(0, 4),
    value=st.recursive(st.integers(0, 3), lambda x: st.lists(x, max_size=3), max_leaves=6),
)
def test_recursion_that_steps_into_the_value_is_a_schema_like_any_other(depth: int, value: Any) -> None:
    # a tree: each node an integer or a list of nodes; the reference is reached inside ``items``
    schema = {
        "type": "object",
        "$defs": {
            "Node": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"$ref": "#/$defs/Node"}}]}
        },
        "properties": {"tree": {"$ref": "#/$defs/Node"}, "same": {"$ref": "#"}},
    }
    rt = Runtime("memory://")
    got: list[Any] = []
    rt.add_tool(name="walk", input_schema=schema, fn=lambda **kw: got.append(kw), effect="read")
    for _ in range(depth):
        value = [value]
    assert rt.call({"name": "walk", "arguments": {"tree": value}}).ok
    assert got == [{"tree": value}]
    refused = rt.call({"name": "walk", "arguments": {"tree": [value, "x"]}})
    assert refused.error is not None and refused.error.category == "invalid_arguments"
