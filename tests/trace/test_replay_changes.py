"""``trace replay`` reports each kind of change since the run (validator, permission, budget,
offer, provenance) as a difference, exit 1; malformed or older events are reported, never raised."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from typing import Any

import pytest
from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.errors import ActionError
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.budget import Budget
from actionspace.policy.principal import Principal
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent
from actionspace.trace.replay import DECISION_KINDS, Replayed, replay_events
from actionspace.validation.verdicts import Rejected

EVERYTHING = ("read:*", "write:*")
_P = "provenance"
FIVE_CALLS = Budget(calls=5)
CALLS: dict[str, int] = {}


def shop(
    *,
    scopes: tuple[str, ...] = EVERYTHING,
    budget: Budget | None = FIVE_CALLS,
    strict: bool = False,
    changed_schema: bool = False,
    store: str = "memory://",
) -> Runtime:
    """A small shop: ``lookup`` (read) and ``order`` (write); each keyword is one change."""
    who = Principal(id="u-1", scopes=scopes)
    rt = Runtime(store, recover_on_start=False, principal=who, budgets=budget)

    def one_at_a_time(ctx: Any, args: Mapping[str, Any]) -> Rejected | None:
        if args["qty"] > 1:
            return Rejected(ActionError.of("invalid_arguments", "one item per order"))
        return None

    @rt.tool(effect="read")
    def lookup(sku: str) -> dict[str, Any]:
        """Look an item up."""
        CALLS["lookup"] = CALLS.get("lookup", 0) + 1
        return {"sku": sku, "price": 3}

    if changed_schema:

        @rt.tool(effect="write")
        def order(sku: str, qty: int, gift: bool = False) -> dict[str, Any]:
            """Order an item."""
            CALLS["order"] = CALLS.get("order", 0) + 1
            return {"ok": True}

    else:

        @rt.tool(effect="write", validators=(one_at_a_time,) if strict else ())
        def order(sku: str, qty: int) -> dict[str, Any]:  # type: ignore[misc]
            """Order an item."""
            CALLS["order"] = CALLS.get("order", 0) + 1
            return {"ok": True}

    return rt


def _raw(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def _record(store: str = "memory://") -> tuple[str, list[TraceEvent]]:
    """One run of the unchanged shop: an offer, two lookups and an order, all admitted."""
    rt = shop(store=store)
    try:
        run = rt.new_run("shop-run")
        rt.offer(run_id=run)
        for raw in (
            _raw("lookup", "c1", sku="a-1"),
            _raw("order", "c2", sku="a-1", qty=2),
            _raw("lookup", "c3", sku="b-2"),
        ):
            assert rt.call(raw, run_id=run).ok
        return run, rt.trace.events(run)
    finally:
        rt.close()


def _replay(events: list[TraceEvent], rt: Runtime) -> Replayed:
    CALLS.clear()
    try:
        return replay_events("shop-run", events, rt)
    finally:
        assert CALLS == {}, "the replay ran a tool"
        rt.close()


def _changed(result: Replayed) -> set[tuple[str, str, str, str]]:
    return {(d.stage, d.tool, d.recorded, d.replayed) for d in result.differences}


def test_the_unchanged_shop_re_decides_every_decision_the_same() -> None:
    _, events = _record()
    result = _replay(events, shop())
    assert result.differences == [] and result.unreplayed == []
    decision_events = {e.seq for e in events if e.kind in DECISION_KINDS}
    assert result.redecided_events == decision_events
    stages = [d.stage for d in result.decisions]
    assert stages.count("offer") == 1 and stages.count("budget") == 3
    assert {"resolve", "authorize", "validate"} <= set(stages)


def test_a_stricter_validator_is_a_difference() -> None:
    _, events = _record()
    changed = _changed(_replay(events, shop(strict=True)))
    assert changed == {("validate", "order", "accepted", "rejected")}


def test_a_removed_permission_is_a_difference() -> None:
    _, events = _record()
    changed = _changed(_replay(events, shop(scopes=("read:*",))))
    assert ("authorize", "order", "allowed", "denied") in changed
    assert {c[0] for c in changed} == {"authorize", "offer"}  # nor is order offered any more


def test_a_lower_budget_is_a_difference() -> None:
    _, events = _record()
    result = _replay(events, shop(budget=Budget(calls=2)))
    assert _changed(result) == {("budget", "lookup", "allowed", "denied:calls")}
    assert [d.call_id for d in result.differences] == ["c3"]  # the third call, not the first two
    assert _replay(events, shop(budget=None)).differences == []  # no budget: every call admitted


def test_a_changed_tool_schema_changes_the_offer_and_the_resolution() -> None:
    _, events = _record()
    result = _replay(events, shop(changed_schema=True))
    stages = {d.stage for d in result.differences}
    assert stages == {"offer", "resolve"}
    offer = next(d for d in result.differences if d.stage == "offer")
    assert "order@1#" in offer.recorded and "order@1#" in offer.replayed
    assert all(d.tool == "order" for d in result.differences if d.stage == "resolve")


def _provenance_run() -> tuple[str, list[TraceEvent]]:
    rules = {"send": {"to": Param("user | tool_result")}}
    rt = Runtime(
        "memory://",
        recover_on_start=False,
        flow_policy=NoSecretToExternalSink() & ArgumentPolicy(rules),
        stages=[ProvenanceStage()],
    )

    @rt.tool(effect="external")
    def send(to: str, body: str) -> dict[str, bool]:
        return {"ok": True}

    run = rt.new_run("shop-run")
    rt.user_input(run, "send hi to bob")
    ok = rt.call(_raw("send", "c1", to="bob", body="hi"), run_id=run, provenance={"to": "user"})
    assert ok.ok
    false = rt.call(_raw("send", "c2", to="eve", body="hi"), run_id=run, provenance={"to": "user"})
    assert false.error is not None and false.error.category == "policy_violation"
    unknown = rt.call(
        _raw("send", "c3", to="bob", body="hi"), run_id=run, provenance={"to": "tool_result:c9"}
    )
    assert unknown.error is not None and unknown.error.category == "policy_violation"
    events = rt.trace.events(run)
    rt.close()
    return run, events


def _fresh_sender() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False, flow_policy=NoSecretToExternalSink())

    @rt.tool(effect="external")
    def send(to: str, body: str) -> dict[str, bool]:
        return {"ok": True}

    return rt


def _edit(events: list[TraceEvent], call_id: str, kind: str, **data: Any) -> list[TraceEvent]:
    """``events`` with the data of ``call_id``'s ``kind`` event changed as ``data`` says."""
    out = []
    for e in events:
        edited = (e.call_id, e.kind) == (call_id, kind)
        out.append(dataclasses.replace(e, data={**e.data, **data}) if edited else e)
    return out


def test_provenance_verdicts_are_re_decided_false_claims_included() -> None:
    _, events = _provenance_run()
    result = replay_events("shop-run", events, _fresh_sender())
    verdicts = [(d.call_id, d.recorded, d.replayed) for d in result.decisions if d.stage == _P]
    assert verdicts == [
        ("c1", "claims hold", "claims hold"),
        ("c2", "false claims: to", "false claims: to"),
        ("c3", "false claims: to", "false claims: to"),
    ]
    assert not [d for d in result.differences if d.stage == "provenance"]


def test_a_trace_whose_provenance_the_evidence_does_not_bear_out_is_a_difference() -> None:
    _, events = _provenance_run()
    # the trace says the user typed eve and the claim held: the user's words disagree
    forged = _edit(
        events,
        "c2",
        "proposed",
        false_claims={},
        provenance={"to": [{"path": "", "source": "user(0:9-12)"}], "body": []},
    )
    result = replay_events("shop-run", forged, _fresh_sender())
    [changed] = [d for d in result.differences if d.stage == "provenance"]
    assert changed.call_id == "c2" and changed.recorded == "claims hold"
    assert changed.replayed.startswith("claims hold; inferred differently: to")
    # an unknown call id the run never observed is still false, whatever the trace claims of it
    c3 = [d.replayed for d in result.decisions if (d.call_id, d.stage) == ("c3", "provenance")]
    assert c3 == ["false claims: to"]


def _ev(kind: str, data: Any, call_id: str | None = "c1") -> TraceEvent:
    return TraceEvent(run_id="r", seq=3, ts=0.0, kind=kind, call_id=call_id, data=data)


@pytest.mark.parametrize(
    "broken",
    [
        _ev("validated", "not an object"),
        _ev("validated", {}),
        _ev("candidates_offered", {"offered": "x"}, None),
        _ev("budget", {"verdict": 7}),
        _ev("proposed", {"provenance": [1]}),
        _ev("model_output", {"raw": {"tool_calls": 5}}, None),
        _ev("flow_checked", {"arguments": [1]}),
    ],
)
def test_malformed_and_older_events_are_reported_never_raised(broken: TraceEvent) -> None:
    _, events = _record()
    spliced = [*events, dataclasses.replace(broken, seq=len(events) + 10)]
    result = _replay(spliced, shop())
    if broken.kind in DECISION_KINDS:
        marks = [d for d in result.decisions if d.seq == len(events) + 10]
        assert marks and all(not d.replayable or d.differs for d in marks)  # never "reproduced"
        assert len(events) + 10 in result.recorded_events
    else:
        assert result.problems
    json.dumps(result.to_dict())  # the report stays printable


def test_an_event_without_a_seq_is_a_problem_not_an_exception() -> None:
    _, events = _record()
    odd: Any = {"seq": None, "kind": "validated"}
    result = replay_events("shop-run", [*events, odd], shop())
    assert result.problems and result.differences == []


SHOP: dict[str, Any] = {}


def fresh_shop() -> Runtime:
    """The ``--runtime`` target of the CLI tests (changed as ``SHOP`` says)."""
    return shop(**SHOP)


def test_trace_replay_exits_1_on_each_kind_of_change_and_0_when_reproduced(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    run, _ = _record(store)
    target = ["replay", run, "--store", store, "--runtime", f"{__name__}:fresh_shop"]
    changes: list[tuple[dict[str, Any], str | None]] = [
        ({}, None),
        ({"strict": True}, "validate"),
        ({"scopes": ("read:*",)}, "authorize"),
        ({"budget": Budget(calls=1)}, "budget"),
        ({"changed_schema": True}, "offer"),
    ]
    for change, stage in changes:
        SHOP.clear()
        SHOP.update(change)
        out = CliRunner().invoke(trace_app, [*target, "--json"])
        report = json.loads(out.stdout)
        if stage is None:
            assert out.exit_code == 0, out.output
            assert report["differences"] == 0
            assert report["redecided_decision_events"] == report["recorded_decision_events"] > 0
        else:
            assert out.exit_code == 1, (change, out.output)
            assert stage in {d["stage"] for d in report["decisions"] if not d["same"]}
    SHOP.clear()
    text = CliRunner().invoke(trace_app, target)
    assert text.exit_code == 0 and "0 differ, 0 not replayed" in text.stdout


def test_strict_fails_a_run_with_decisions_it_could_not_replay(tmp_path: Any) -> None:
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = shop(store=store)
    run = rt.new_run("plan-run")
    node = {"id": "n1", "tool": "lookup", "arguments": {"sku": "a-1"}}
    rt.run_plan({"nodes": [node]}, run_id=run)
    rt.close()
    target = ["replay", run, "--store", store, "--runtime", f"{__name__}:fresh_shop"]
    SHOP.clear()
    assert CliRunner().invoke(trace_app, [*target, "--strict"]).exit_code == 0  # all replayed
    # a trace from before plan nodes recorded their arguments: the node's validation is not replayed
    with sqlite3.connect(tmp_path / "trace.db") as db:
        assert db.execute("DELETE FROM trace_events WHERE kind = 'proposed'").rowcount == 1
    lenient = CliRunner().invoke(trace_app, target)
    assert lenient.exit_code == 0 and "? #" in lenient.stdout
    assert CliRunner().invoke(trace_app, [*target, "--strict"]).exit_code == 1
