"""``GET /api/metrics`` stays bounded however many tool and field names a model (or a client
starting runs) invents: every tool of the catalog is shown, at most a few names outside it (the
most called), and at most a bounded number of rejected fields a tool; what is left out is counted,
never dropped silently."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Principal, Runtime
from actionspace.service import create_app
from actionspace.service.api_catalog import MAX_FIELDS_SHOWN, MAX_UNLISTED_TOOLS, OTHER_FIELDS
from actionspace.types import ToolCall
from tests.service.apptools import bearer

TOKENS = {"ops": Principal(id="ops", scopes=("metrics:read", "catalog:read"))}


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    return rt


def _metrics(rt: Runtime) -> dict[str, Any]:
    with TestClient(create_app(rt, tokens=TOKENS)) as client:
        got = client.get("/api/metrics", headers=bearer("ops"))
        assert got.status_code == 200, got.text
        body = got.json()
        assert isinstance(body, dict)
        return body


@settings(max_examples=8, deadline=None)
@given(invented=st.integers(0, 3 * MAX_UNLISTED_TOOLS), fields=st.integers(0, 3 * MAX_FIELDS_SHOWN))
def test_invented_tool_and_field_names_are_bounded_and_counted(invented: int, fields: int) -> None:
    rt = _runtime()
    try:
        for i in range(invented):
            rt.call(ToolCall(name=f"made_up_{i:03d}", arguments={}), run_id="r-tools", node_id=f"n{i}")
        for i in range(fields):
            wrong = ToolCall(name="lookup", arguments={"city": "x", f"field_{i:03d}": 1})
            rt.call(wrong, run_id="r-fields", node_id=f"n{i}")
        body = _metrics(rt)
    finally:
        rt.close()
    tools = body["tools"]
    assert isinstance(tools, list)
    names = [t["tool"] for t in tools]
    unlisted = [n for n in names if n != "lookup"]
    assert len(unlisted) == min(invented, MAX_UNLISTED_TOOLS)
    assert body["tools_left_out"] == invented - len(unlisted)
    assert body["calls_left_out"] == invented - len(unlisted)  # one call each
    assert {a["tool"] for a in body["alerts"]} <= set(names)
    if fields:
        (lookup,) = [t for t in tools if t["tool"] == "lookup"]
        by_field = lookup["rejects_by_field"]
        assert len(by_field) <= MAX_FIELDS_SHOWN + 1
        assert sum(by_field.values()) == fields  # what is not named is counted under OTHER_FIELDS
        assert (OTHER_FIELDS in by_field) == (fields > MAX_FIELDS_SHOWN)
