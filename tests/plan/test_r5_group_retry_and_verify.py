"""Atomic groups under ``retry_of`` and member verifiers: a member whose verifier rejects its
result fails the group (rolled back, never committed), and a retry takes a committed group whole —
its members' observations included — without running any of them again."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace import ActionError, Plan, PlanNode, Runtime, ToolError
from actionspace.plan.environments import SqliteEnvironment, SqliteTransaction
from actionspace.plan.model import Group
from actionspace.types import Observation
from actionspace.validation.verdicts import Accepted, Rejected, Verdict
from tests.plan.settings_table import rows as _rows


@pytest.fixture(params=["memory", "sqlite"])
def rt(request: pytest.FixtureRequest, db: Path, tmp_path: Path) -> Runtime:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'runtime.db'}"
    runtime = Runtime(store, recover_on_start=False)
    runtime.environment("settings", SqliteEnvironment(db))
    runtime.sent = []  # type: ignore[attr-defined]

    @runtime.tool(effect="write", writes=["setting:{name}"], transaction="settings")
    def put(name: str, value: str, transaction: SqliteTransaction | None = None) -> str:
        """Set a setting inside the group's transaction."""
        runtime.sent.append(name)  # type: ignore[attr-defined]
        assert transaction is not None
        transaction.connection.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (name, value))
        return value

    flaky = {"left": 1}

    @runtime.tool(effect="none")
    def echo(x: str) -> str:
        """Fails once (transiently), then echoes."""
        if flaky["left"]:
            flaky["left"] -= 1
            raise ToolError("permanent", "not this time")
        return x

    return runtime


def _not_two(obs: Observation) -> Verdict:
    if obs.data == "2":
        return Rejected(ActionError.of("permanent", "the value 2 is not allowed here"))
    return Accepted()


def test_a_member_rejected_by_its_verifier_fails_the_group_and_nothing_commits(rt: Runtime, db: Path) -> None:
    plan = Plan(
        nodes=[
            PlanNode(id="a", tool="put", arguments={"name": "a", "value": "1"}),
            PlanNode(id="b", tool="put", arguments={"name": "b", "value": "2"}, verify=_not_two),
            PlanNode(id="c", tool="put", arguments={"name": "c", "value": "3"}),
        ],
        groups=[Group(id="g", nodes=("a", "b", "c"))],
    )
    result = rt.run_plan(plan, run_id="v1")
    assert _rows(db) == []
    b = result.nodes["b"].error
    assert b is not None and b.category == "permanent" and "not allowed" in b.message
    a, c = result.nodes["a"].error, result.nodes["c"].error
    assert a is not None and a.category == "cancelled" and a.details["rolled_back"] is True
    assert c is not None and c.details["phase"] == "not_dispatched"
    assert result.nodes["g"].error is not None
    assert rt.sent == ["a", "b"]  # type: ignore[attr-defined]
    verified = [e.data for e in rt.trace.events("v1") if e.kind == "verified"]
    assert verified == [
        {
            "node": "b",
            "verdict": "rejected",
            "category": "permanent",
            "message": "the value 2 is not allowed here",
        }
    ]


def test_a_retry_takes_a_committed_group_whole_and_reruns_only_what_failed(rt: Runtime, db: Path) -> None:
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "a", "tool": "put", "arguments": {"name": "a", "value": "1"}},
                {"id": "b", "tool": "put", "arguments": {"name": "b", "value": "2"}},
                {"id": "use", "tool": "echo", "arguments": {"x": {"$ref": "b.data"}}},
            ],
            "groups": [{"id": "g", "nodes": ["a", "b"]}],
        }
    )
    first = rt.run_plan(plan, run_id="r1")
    assert first.nodes["g"].ok and first.nodes["use"].error is not None
    again = rt.run_plan(plan, run_id="r1", retry_of=first)
    assert again.nodes["use"].data == "2", again.nodes["use"].error
    assert again.nodes["g"] == first.nodes["g"]
    assert again.nodes["a"] == first.nodes["a"] and again.nodes["b"] == first.nodes["b"]
    assert rt.sent == ["a", "b"]  # type: ignore[attr-defined]
    assert again.stats["reused"] == 1
    assert _rows(db) == [("a", "1"), ("b", "2")]
