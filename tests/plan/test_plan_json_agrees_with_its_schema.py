"""``Plan.from_dict`` refuses what the published plan schema refuses: a node that names both a
tool and speculative alternatives (which of them would run?) and a cost cap that is negative or
not a number at all; each refusal is a typed error naming the field."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import pytest

from actionspace import Cost, Runtime
from actionspace.plan import PLAN_SCHEMA


def _runtime(ran: list[str]) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", reads=["quotes:"], cost=Cost(per_call=1.0))
    def quote(source: str) -> str:
        """Ask one price source."""
        ran.append(f"quote {source}")
        return source

    @rt.tool(effect="external", writes=["orders:"])
    def order(item: str) -> str:
        """Place an order."""
        ran.append(f"order {item}")
        return item

    return rt


ALTERNATIVES = [
    {"tool": "quote", "arguments": {"source": "a"}},
    {"tool": "quote", "arguments": {"source": "b"}},
]


@pytest.mark.parametrize(
    ("node", "path"),
    [
        (
            {"id": "n", "tool": "order", "arguments": {"item": "x"}, "first_of": ALTERNATIVES},
            "/nodes/0/tool",
        ),
        ({"id": "n", "first_of": ALTERNATIVES, "cost_cap": -1}, "/nodes/0/cost_cap"),
    ],
    ids=["tool-and-first_of", "negative-cost-cap"],
)
def test_a_node_the_schema_refuses_is_refused_naming_the_field(node: dict[str, Any], path: str) -> None:
    plan = {"nodes": [node]}
    assert not jsonschema_rs.Draft202012Validator(PLAN_SCHEMA).is_valid(plan)
    _assert_refused(plan, path)


def test_a_cost_cap_that_is_not_a_number_is_refused() -> None:
    # Python's JSON reader takes NaN, which no cap compares with: every alternative would launch
    text = json.dumps({"nodes": [{"id": "n", "first_of": ALTERNATIVES, "cost_cap": "CAP"}]})
    plan = json.loads(text.replace('"CAP"', "NaN"))
    _assert_refused(plan, "/nodes/0/cost_cap")


def _assert_refused(plan: dict[str, Any], path: str) -> None:
    ran: list[str] = []
    result = _runtime(ran).run_plan(plan)
    assert result.status == "error" and result.nodes == {} and ran == []
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert path in [f.path for f in result.error.field_errors]


def test_a_cost_cap_of_zero_launches_only_the_first_alternative() -> None:
    ran: list[str] = []
    plan = {"nodes": [{"id": "n", "first_of": ALTERNATIVES, "cost_cap": 0}]}
    assert jsonschema_rs.Draft202012Validator(PLAN_SCHEMA).is_valid(plan)
    result = _runtime(ran).run_plan(plan)
    assert result.status == "ok" and ran == ["quote a"]
