"""Plans end to end through a real Runtime: checking, failure isolation, retry, joins, verify."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Plan, Principal, Runtime, ToolError
from actionspace.execution.result import ToolResult
from actionspace.validation.verdicts import Accepted, Rejected


@pytest.fixture
def world() -> dict[str, Any]:
    return {"files": {"a": "A0", "b": "B0", "c": "C0"}, "sent": [], "writes": 0}


@pytest.fixture
def rt(world: dict[str, Any]) -> Runtime:
    runtime = Runtime("memory://", recover_on_start=False)

    @runtime.tool(effect="read", reads=["file:{path}"])
    async def read_file(path: str) -> ToolResult:
        """Read a file."""
        await asyncio.sleep(0)
        if path not in world["files"]:
            raise ToolError("permanent", f"no file {path}")
        content = world["files"][path]
        return ToolResult(
            data={"path": path, "content": content, "hash": f"h:{content}"}, resource_version=content
        )

    @runtime.tool(effect="write", writes=["file:{path}"])
    async def write_file(path: str, content: str, base: str) -> dict[str, Any]:
        """Write a file if its hash is still ``base``."""
        await asyncio.sleep(0)
        world["writes"] += 1
        if f"h:{world['files'][path]}" != base:
            raise ToolError("stale_reference", f"{path} changed", current_version=world["files"][path])
        world["files"][path] = content
        return {"path": path}

    @runtime.tool(effect="external", writes=["mail:{to}"])
    def send(to: str, body: str) -> str:
        """Send a message."""
        world["sent"].append((to, body))
        return "sent"

    @runtime.tool(effect="none")
    def concat(parts: list[str]) -> str:
        """Join strings."""
        return "+".join(parts)

    return runtime


def test_references_feed_final_values_and_the_plan_is_keyed_by_node(
    rt: Runtime, world: dict[str, Any]
) -> None:
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "ra", "tool": "read_file", "arguments": {"path": "a"}},
                {"id": "rb", "tool": "read_file", "arguments": {"path": "b"}},
                {
                    "id": "join",
                    "tool": "concat",
                    "arguments": {"parts": [{"$ref": "ra.data.content"}, {"$ref": "rb.data.content"}]},
                },
                {
                    "id": "wa",
                    "tool": "write_file",
                    "arguments": {
                        "path": "a",
                        "content": {"$ref": "join.data"},
                        "base": {"$ref": "ra.data.hash"},
                    },
                },
            ]
        }
    )
    result = rt.run_plan(plan)
    assert result.status == "ok", result.failed
    assert list(result.nodes) == ["ra", "rb", "join", "wa"]
    assert result.nodes["join"].data == "A0+B0"
    assert world["files"]["a"] == "A0+B0"
    assert result.stats["max_parallel"] == 2


def test_a_failed_node_blocks_only_its_descendants(rt: Runtime, world: dict[str, Any]) -> None:
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "missing", "tool": "read_file", "arguments": {"path": "zzz"}},
                {"id": "rb", "tool": "read_file", "arguments": {"path": "b"}},
                {"id": "child", "tool": "concat", "arguments": {"parts": [{"$ref": "missing.data.content"}]}},
                {
                    "id": "grandchild",
                    "tool": "send",
                    "arguments": {"to": "x", "body": {"$ref": "child.data"}},
                },
                {"id": "sibling", "tool": "concat", "arguments": {"parts": [{"$ref": "rb.data.content"}]}},
            ]
        }
    )
    result = rt.run_plan(plan)
    assert result.status == "partial"
    assert result.nodes["missing"].error is not None and result.nodes["missing"].error.category == "permanent"
    for blocked in ("child", "grandchild"):
        err = result.nodes[blocked].error
        assert err is not None and err.category == "cancelled"
        assert err.details == {"blocked_by": "missing", "phase": "not_dispatched"}
    assert result.nodes["sibling"].data == "B0"
    assert world["sent"] == []


def test_conflicting_writes_are_ordered_and_a_stale_write_fails_alone(
    rt: Runtime, world: dict[str, Any]
) -> None:
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "r", "tool": "read_file", "arguments": {"path": "c"}},
                {
                    "id": "w1",
                    "tool": "write_file",
                    "arguments": {"path": "c", "content": "C1", "base": {"$ref": "r.data.hash"}},
                },
                {
                    "id": "w2",
                    "tool": "write_file",
                    "arguments": {"path": "c", "content": "C2", "base": {"$ref": "r.data.hash"}},
                },
            ]
        }
    )
    result = rt.run_plan(plan)
    assert {"from": "w1", "to": "w2", "resource": "file:c"} in result.added_edges
    assert result.nodes["w1"].ok
    err = result.nodes["w2"].error
    assert err is not None and err.category == "stale_reference" and err.current_version == "C1"
    assert world["files"]["c"] == "C1"


def test_a_failed_write_does_not_block_the_write_it_was_only_ordered_before(
    rt: Runtime, world: dict[str, Any]
) -> None:
    """w1 and w2 both write file:c, so a conflict edge orders them; it only orders: w1 failing
    (its base is stale) blocks nothing, and w2, which also depends on r, still runs. (A checked
    node's needs share its preds set until a conflict edge is added: the edge must not become a
    need.)"""
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "r", "tool": "read_file", "arguments": {"path": "c"}},
                {
                    "id": "w1",
                    "tool": "write_file",
                    "arguments": {"path": "c", "content": "C1", "base": "h:old"},
                },
                {
                    "id": "w2",
                    "tool": "write_file",
                    "arguments": {"path": "c", "content": "C2", "base": {"$ref": "r.data.hash"}},
                },
            ]
        }
    )
    result = rt.run_plan(plan)
    assert {"from": "w1", "to": "w2", "resource": "file:c"} in result.added_edges
    err = result.nodes["w1"].error
    assert err is not None and err.category == "stale_reference"
    assert result.nodes["w2"].ok, result.nodes["w2"].error
    assert world["files"]["c"] == "C2"


def test_a_false_independence_claim_rejects_the_plan_before_anything_runs(
    rt: Runtime, world: dict[str, Any]
) -> None:
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "s1", "tool": "send", "arguments": {"to": "bob", "body": "1"}},
                {
                    "id": "s2",
                    "tool": "send",
                    "arguments": {"to": "bob", "body": "2"},
                    "independent_of": ["s1"],
                },
            ]
        }
    )
    assert result.status == "error" and result.error is not None
    assert result.error.category == "invalid_arguments"
    assert result.error.field_errors[0].path == "/nodes/1/independent_of"
    assert world["sent"] == []


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        (
            {
                "nodes": [
                    {"id": "a", "tool": "concat", "arguments": {"parts": []}, "depends_on": ["b"]},
                    {"id": "b", "tool": "concat", "arguments": {"parts": []}, "depends_on": ["a"]},
                ]
            },
            "/nodes/0/depends_on",
        ),
        (
            {"nodes": [{"id": "a", "tool": "concat", "arguments": {"parts": [{"$ref": "ghost.data"}]}}]},
            "/nodes/0/arguments/parts/0",
        ),
        (
            {
                "nodes": [
                    {"id": "a", "tool": "concat", "arguments": {"parts": [{"$ref": "b.secret"}]}},
                    {"id": "b", "tool": "concat", "arguments": {"parts": []}},
                ]
            },
            "/nodes/0/arguments/parts/0",
        ),
        ({"nodes": [{"id": "a", "tool": "nope", "arguments": {}}]}, "/nodes/0/tool"),
        ({"nodes": [{"id": "a", "tool": "concat"}, {"id": "a", "tool": "concat"}]}, "/nodes/1/id"),
        (
            {
                "nodes": [
                    {
                        "id": "w",
                        "tool": "write_file",
                        "arguments": {"path": "a", "content": "x", "base": "y"},
                        "writes": ["file:b"],
                    }
                ]
            },
            "/nodes/0/writes",
        ),
        (
            {"nodes": [{"id": "s", "first_of": [{"tool": "send", "arguments": {"to": "a", "body": "b"}}]}]},
            "/nodes/0/first_of/0/tool",
        ),
        ({"nodes": []}, "/nodes"),
    ],
)
def test_an_unsafe_or_malformed_plan_is_a_typed_error(rt: Runtime, plan: dict[str, Any], path: str) -> None:
    result = rt.run_plan(plan)
    assert result.status == "error" and result.error is not None
    assert result.error.category == "invalid_arguments"
    assert path in [f.path for f in result.error.field_errors]
    assert result.nodes == {}


def test_permissions_are_checked_per_node_before_anything_runs(rt: Runtime, world: dict[str, Any]) -> None:
    reader = Principal(id="r", scopes=("read:*", "none:*"))
    result = rt.run_plan(
        {
            "nodes": [
                {"id": "r", "tool": "read_file", "arguments": {"path": "a"}},
                {"id": "s", "tool": "send", "arguments": {"to": "x", "body": "y"}},
            ]
        },
        principal=reader,
    )
    assert result.error is not None and result.error.category == "permission_denied"
    assert world["sent"] == []


def test_retrying_a_plan_reruns_only_failed_nodes_and_never_resends_a_committed_write(
    rt: Runtime, world: dict[str, Any]
) -> None:
    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "mail", "tool": "send", "arguments": {"to": "ops", "body": "starting"}},
                {"id": "rd", "tool": "read_file", "arguments": {"path": "d"}},
                {"id": "after", "tool": "concat", "arguments": {"parts": [{"$ref": "rd.data.content"}]}},
            ]
        }
    )
    first = rt.run_plan(plan, run_id="retry-run")
    assert first.status == "partial" and world["sent"] == [("ops", "starting")]
    world["files"]["d"] = "D0"
    second = rt.run_plan(plan, run_id="retry-run", retry_of=first)
    assert second.status == "ok"
    assert second.stats["reused"] == 1
    assert second.nodes["after"].data == "D0"
    assert world["sent"] == [("ops", "starting")]
    third = rt.run_plan(plan, run_id="retry-run")  # no retry_of: the ledger still refuses to resend
    assert third.nodes["mail"].diagnostics.get("replayed") is True
    assert world["sent"] == [("ops", "starting")]


def test_a_join_of_inputs_from_different_versions_is_stale(world: dict[str, Any]) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    versions = iter(["v1", "v2"])

    @rt.tool(effect="read", reads=["doc:{name}"])
    def snapshot(name: str, part: str) -> ToolResult:
        """Read part of a document."""
        return ToolResult(data=part, resource_version=next(versions))

    @rt.tool(effect="none")
    def combine(x: str, y: str) -> str:
        """Combine two parts."""
        return x + y

    result = rt.run_plan(
        {
            "nodes": [
                {"id": "p1", "tool": "snapshot", "arguments": {"name": "report", "part": "a"}},
                {"id": "p2", "tool": "snapshot", "arguments": {"name": "report", "part": "b"}},
                {
                    "id": "c",
                    "tool": "combine",
                    "arguments": {"x": {"$ref": "p1.data"}, "y": {"$ref": "p2.data"}},
                },
            ]
        }
    )
    err = result.nodes["c"].error
    assert err is not None and err.category == "stale_reference"
    assert err.details["inputs"] == {"p1": "v1", "p2": "v2"}


def test_a_verifier_rejection_fails_the_node_and_blocks_its_successors(rt: Runtime) -> None:
    def must_be_b(obs: Any) -> Accepted | Rejected:
        from actionspace import ActionError

        if obs.data["content"] == "B0":
            return Accepted()
        return Rejected(ActionError.of("permanent", "not the official source"))

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "ra", "tool": "read_file", "arguments": {"path": "a"}},
                {"id": "rb", "tool": "read_file", "arguments": {"path": "b"}},
                {"id": "use", "tool": "concat", "arguments": {"parts": [{"$ref": "ra.data.content"}]}},
            ]
        },
        verify={"ra": must_be_b, "rb": must_be_b},
    )
    result = rt.run_plan(plan)
    assert result.nodes["rb"].ok
    assert (
        result.nodes["ra"].error is not None and result.nodes["ra"].error.message == "not the official source"
    )
    assert result.nodes["use"].error is not None and result.nodes["use"].error.details["blocked_by"] == "ra"
    kinds = [e.kind for e in rt.trace.events(result.run_id)]
    assert kinds.count("verified") == 2 and "plan_started" in kinds and "plan_finished" in kinds


def test_run_plan_inside_an_event_loop_is_a_configuration_error(rt: Runtime) -> None:
    from actionspace.errors import ConfigurationError

    async def inner() -> None:
        with pytest.raises(ConfigurationError):
            rt.run_plan({"nodes": [{"id": "a", "tool": "concat", "arguments": {"parts": []}}]})

    asyncio.run(inner())


def test_a_write_that_failed_transiently_is_sent_again_on_retry_and_only_once() -> None:
    from actionspace.catalog import RetryPolicy

    rt = Runtime("memory://", recover_on_start=False)
    sends: list[str] = []
    failures = iter([True, False, False])

    @rt.tool(effect="write", writes=["ledger:{account}"], retry=RetryPolicy(max_attempts=1))
    def post(account: str, amount: int) -> str:
        """Post an amount."""
        sends.append(account)
        if next(failures):
            raise ToolError("transient", "upstream hiccup")
        return "posted"

    @rt.tool(effect="write", writes=["ledger:{account}"])
    def note(account: str) -> str:
        """Write a note."""
        sends.append(f"note:{account}")
        return "noted"

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "pay", "tool": "post", "arguments": {"account": "a1", "amount": 5}},
                {"id": "other", "tool": "note", "arguments": {"account": "b2"}},
            ]
        }
    )
    first = rt.run_plan(plan, run_id="pay-run")
    assert first.failed["pay"].category == "transient"
    second = rt.run_plan(plan, run_id="pay-run", retry_of=first)
    third = rt.run_plan(plan, run_id="pay-run")
    assert second.status == "ok" and third.status == "ok"
    assert third.nodes["pay"].diagnostics.get("replayed") is True
    # the two nodes of the first run write apart and run at once, in either order
    assert sorted(sends[:2]) == ["a1", "note:b2"]
    assert sends[2:] == ["a1"]  # the failed write once more, nothing else again


def test_a_node_waiting_for_approval_holds_only_its_branch_and_runs_once_after_approval() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[int] = []

    @rt.tool(effect="external", writes=["account:{to}"], requires_approval=True)
    def transfer(to: str, amount: int) -> str:
        """Move money."""
        sent.append(amount)
        return "moved"

    @rt.tool(effect="none")
    def receipt(text: str) -> str:
        """Format a receipt."""
        return f"receipt: {text}"

    @rt.tool(effect="read", reads=["rates:"])
    def rate(currency: str) -> float:
        """Look up a rate."""
        return 1.1

    plan = Plan.from_dict(
        {
            "nodes": [
                {"id": "pay", "tool": "transfer", "arguments": {"to": "bob", "amount": 40}},
                {"id": "print", "tool": "receipt", "arguments": {"text": {"$ref": "pay.data"}}},
                {"id": "fx", "tool": "rate", "arguments": {"currency": "EUR"}},
            ]
        }
    )
    held = rt.run_plan(plan, run_id="approve-run")
    assert held.status == "partial" and held.nodes["fx"].ok
    err = held.nodes["pay"].error
    assert err is not None and err.category == "needs_approval"
    assert held.nodes["print"].error is not None and held.nodes["print"].error.details["blocked_by"] == "pay"
    [request] = rt.approvals.list()
    assert request.arguments == {"to": "bob", "amount": 40}
    rt.approvals.approve(request.id, by="alice", reason="rent")
    done = rt.run_plan(plan, run_id="approve-run", retry_of=held)
    assert done.status == "ok" and done.nodes["print"].data == "receipt: moved"
    rt.run_plan(plan, run_id="approve-run", retry_of=done)
    assert sent == [40]


def test_references_are_type_checked_against_both_schemas_before_anything_runs() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    ran: list[str] = []

    @rt.tool(effect="read", reads=["orders:"])
    def order_total(order_id: str) -> dict[str, float]:
        """Total of an order."""
        ran.append("total")
        return {"total": 12.5}

    @rt.tool(effect="read", reads=["orders:"])
    def order_lines(order_id: str) -> list[str]:
        """Lines of an order."""
        ran.append("lines")
        return ["a", "b"]

    @rt.tool(effect="none")
    def label(text: str) -> str:
        """Make a label."""
        return text

    bad = rt.run_plan(
        {
            "nodes": [
                {"id": "t", "tool": "order_total", "arguments": {"order_id": "o1"}},
                {"id": "l", "tool": "label", "arguments": {"text": {"$ref": "t.data.total"}}},
                {"id": "m", "tool": "label", "arguments": {"text": {"$ref": "n.data.count"}}},
                {"id": "n", "tool": "order_lines", "arguments": {"order_id": "o1"}},
            ]
        }
    )
    assert bad.error is not None and bad.error.category == "invalid_arguments"
    messages = {f.path: f.message for f in bad.error.field_errors}
    assert "number" in messages["/nodes/1/arguments/text"] and "string" in messages["/nodes/1/arguments/text"]
    assert "cannot take field 'count' of array" in messages["/nodes/2/arguments/text"]
    assert ran == []
    good = rt.run_plan(
        {
            "nodes": [
                {"id": "n", "tool": "order_lines", "arguments": {"order_id": "o1"}},
                {"id": "l", "tool": "label", "arguments": {"text": {"$ref": "n.data[1]"}}},
            ]
        }
    )
    assert good.status == "ok" and good.nodes["l"].data == "b"
