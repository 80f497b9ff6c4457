"""Plans as a model sends them, wrong types everywhere: a typed error, never another exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.errors import InvalidPlan

_KEYS = ["id", "tool", "arguments", "depends_on", "reads", "writes", "independent_of", "first_of"]
_KEYS += ["cost_cap", "provenance", "nodes", "groups", "mode", "max_concurrency", "$ref", "path", "x"]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["n1", "n2", "read", "write", "n1.data", "n2.data.x", "n1.nope", ""]),
)
_keys = st.one_of(st.sampled_from(_KEYS), st.text(max_size=6), st.integers(), st.none(), st.booleans())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(_keys, inner, max_size=5),
        st.tuples(inner, inner),
    ),
    max_leaves=25,
)
_node = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.sampled_from(["n1", "n2", "n3"]), _values),
        "tool": st.one_of(st.sampled_from(["read", "write", "nope"]), _values),
        "arguments": st.one_of(
            st.fixed_dictionaries({}, optional={"key": _values, "value": _values}), _values
        ),
        "depends_on": st.one_of(st.lists(st.sampled_from(["n1", "n2", "n3", "ghost"])), _values),
        "reads": _values,
        "writes": _values,
        "independent_of": _values,
        "first_of": _values,
        "cost_cap": _values,
        "provenance": _values,
    },
)
_plans = st.one_of(
    _values,
    st.fixed_dictionaries(
        {"nodes": st.one_of(st.lists(st.one_of(_node, _values), max_size=4), _values)},
        optional={"groups": _values, "max_concurrency": _values, "extra": _values},
    ),
)


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["kv:{key}"])
    def read(key: str) -> dict[str, Any]:
        """Read a value."""
        return {"key": key, "x": 1}

    @rt.tool(effect="write", writes=["kv:{key}"])
    def write(key: str, value: Any = None) -> str:
        """Write a value."""
        return "ok"

    return rt


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plans)
def test_from_dict_answers_any_json_with_a_plan_or_a_typed_error(data: Any) -> None:
    try:
        plan = Plan.from_dict(data)
    except InvalidPlan as exc:
        assert exc.error.category == "invalid_arguments"
        assert exc.error.recovery
        return
    assert plan.nodes


_RT = _runtime()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_plans)
def test_running_any_json_ends_in_observations_or_a_typed_error(data: Any) -> None:
    result = _RT.run_plan(data)
    if result.error is not None:
        assert result.status == "error" and not result.nodes
        return
    for obs in result.nodes.values():
        assert obs.status == "ok" or obs.error is not None


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        ({"nodes": [{"id": "n1", "tool": "read", "cost_cap": 10**400}]}, "/nodes/0/cost_cap"),
        ({"nodes": [{"id": "n1", "tool": "read"}], 1: "x", "y": 2}, "/"),
        ({"nodes": [{"id": "n1", "tool": "read", 3: "x", "z": 1}]}, "/nodes/0"),
        ({"nodes": [{"id": "n1", "tool": "read", "provenance": {1: "user"}}]}, "/nodes/0/provenance"),
        ({"nodes": [{"id": "n1", "tool": "read", "arguments": {1: "x"}}]}, "/nodes/0/arguments"),
        (
            {"nodes": [{"id": "n1", "tool": "read"}], "groups": [{"id": "g", "nodes": ["n1"], 2: 1, "m": 1}]},
            "/groups/0",
        ),
    ],
)
def test_keys_and_numbers_json_cannot_hold_are_field_errors(plan: dict[Any, Any], path: str) -> None:
    with pytest.raises(InvalidPlan) as caught:
        Plan.from_dict(plan)
    assert caught.value.error.field_errors[0].path == path


def test_a_huge_cost_cap_is_refused_not_overflowed() -> None:
    with pytest.raises(InvalidPlan):
        Plan.from_dict({"nodes": [{"id": "n1", "first_of": [{"tool": "read"}], "cost_cap": 10**400}]})


_ref = st.builds(
    lambda node, path: {"$ref": f"{node}{path}"},
    st.sampled_from(["n1", "n2", "n3", "ghost", "", "n1~0"]),
    st.sampled_from(["", ".data", ".data.x", ".data.key", ".error", ".diagnostics", ".call_id", ".data.0"]),
)
_ref_nodes = st.lists(
    st.fixed_dictionaries(
        {
            "id": st.sampled_from(["n1", "n2", "n3"]),
            "tool": st.sampled_from(["read", "write"]),
            "arguments": st.fixed_dictionaries({"key": st.one_of(st.text(max_size=3), _ref)}),
        },
        optional={"depends_on": st.lists(st.sampled_from(["n1", "n2", "n3"]), max_size=2)},
    ),
    min_size=1,
    max_size=4,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ref_nodes)
def test_nodes_referring_to_each_other_in_any_way_run_in_order_or_are_refused(nodes: list[Any]) -> None:
    result = _RT.run_plan({"nodes": nodes})
    if result.error is not None:
        assert result.error.category == "invalid_arguments" and not result.nodes
        return
    position = {k: i for i, k in enumerate(result.nodes)}
    for a, b in result.edges:  # every edge kept: a node never ran before what it waited for
        assert a in position and b in position
        if result.nodes[b].status == "ok":
            assert result.nodes[a].status == "ok" or (a, b) in {
                (e["from"], e["to"]) for e in result.added_edges
            }
