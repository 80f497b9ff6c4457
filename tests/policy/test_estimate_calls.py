"""Estimating parsed calls against a catalog: each at its tool's version, summed; fits what remains."""

from __future__ import annotations

import pytest

from actionspace import Cost, Runtime, ToolCall
from actionspace.errors import UnknownToolError
from actionspace.policy.budget import Usage, estimate, estimate_calls

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}}


def test_calls_are_estimated_at_their_tools_versions_and_summed() -> None:
    with Runtime() as rt:
        rt.add_tool(name="look", input_schema=SCHEMA, fn=lambda q="": q, effect="read", version="1")
        rt.add_tool(
            name="look",
            input_schema=SCHEMA,
            fn=lambda q="": q,
            effect="read",
            version="2",
            cost=Cost(per_call=2.0),
        )
        calls = [ToolCall(name="look@1", arguments={"q": "a"}), ToolCall(name="look", arguments={"q": "b"})]
        total = estimate_calls(rt.catalog, calls)
        v1, v2 = rt.catalog.get("look", "1"), rt.catalog.get("look", "2")
        assert total == estimate(v1, {"q": "a"}) + estimate(v2, {"q": "b"})
        assert total.money == 2.0
        with pytest.raises(UnknownToolError):
            estimate_calls(rt.catalog, [ToolCall(name="missing", arguments={})])


def test_a_usage_fits_when_no_limited_unit_is_exceeded() -> None:
    usage = Usage(calls=2, money=1.0)
    assert usage.fits({})
    assert usage.fits({"calls": 2.0, "money": 1.0})
    assert not usage.fits({"calls": 1.0})
