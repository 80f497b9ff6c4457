"""``actionspace monitor`` on a small trace whose every figure is counted by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from actionspace import Principal, Runtime
from actionspace.cli import _mount, app
from actionspace.policy import Budget


def _call(call_id: str, name: str, **arguments: object) -> dict[str, object]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.fixture
def store(tmp_path: Path) -> str:
    """One run, nine calls: every way a call of ``lookup`` or ``save`` can end, once or twice."""
    url = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = Runtime(url, budgets=[Budget(calls=4, per="run")])

    @rt.tool(effect="read")
    def lookup(city: str) -> dict[str, object]:
        """Look a city up."""
        if city == "down":
            raise RuntimeError("the backend is down")
        return {"city": city}

    @rt.tool(effect="write", writes=["note:{key}"])
    def save(key: str, text: str) -> str:
        """Save a note."""
        return key

    reader = Principal(id="bob", scopes=["read:*"])
    outcomes = [
        rt.call(_call("c1", "lookup", city="Oslo"), run_id="r1"),  # ok
        rt.call(_call("c2", "lookup", city=5), run_id="r1"),  # invalid_arguments on /city
        rt.call(_call("c3", "lookup", city="down"), run_id="r1"),  # dispatched, failed
        rt.call(_call("c4", "lokup", city="x"), run_id="r1"),  # unknown_tool
        rt.call(_call("c5", "save", key="k", text="t"), run_id="r1", principal=reader),  # denied
        rt.call(_call("c6", "save", key="k"), run_id="r1"),  # invalid_arguments on /text
        rt.call(_call("c7", "save", key="k2", text="t"), run_id="r1"),  # ok
        rt.call(_call("c8", "save", key="k3", text="t"), run_id="r1"),  # ok: the 4th call the budget meters
        rt.call(_call("c9", "save", key="k4", text="t"), run_id="r1"),  # budget_exceeded
    ]
    rt.close()
    categories = [o.error.category if o.error else "ok" for o in outcomes]
    assert categories == [
        "ok",
        "invalid_arguments",
        "unclassified",
        "unknown_tool",
        "permission_denied",
        "invalid_arguments",
        "ok",
        "ok",
        "budget_exceeded",
    ]
    return url


def test_every_call_of_a_tool_is_ok_rejected_or_failed_and_each_is_counted_once(store: str) -> None:
    _mount()
    result = CliRunner().invoke(app, ["monitor", "--store", store, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    tools = {t["tool"]: t for t in report["tools"]}
    assert (report["runs"], report["calls"]) == (1, 9)
    save, lookup, typo = tools["save"], tools["lookup"], tools["lokup"]
    assert save["calls"] == 5 and save["selection_rate"] == pytest.approx(5 / 9)
    assert save["rejects_by_category"] == {
        "budget_exceeded": 1,
        "invalid_arguments": 1,
        "permission_denied": 1,
    }
    assert save["rejects_by_field"] == {"/text": 1}
    assert save["failures_by_category"] == {} and save["ok_results"] == 2
    assert lookup["calls"] == 3 and lookup["rejects_by_category"] == {"invalid_arguments": 1}
    assert lookup["failures_by_category"] == {"unclassified": 1} and lookup["ok_results"] == 1
    assert typo["rejects_by_category"] == {"unknown_tool": 1}
    for health in tools.values():
        assert health["rejects"] + health["failures"] + health["ok_results"] == health["calls"]
