"""Restoring a held call's recorded evidence in a fresh flow state gives every value its provenance back."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.approval.requests import ApprovalRequest
from actionspace.errors import ActionError
from actionspace.policy.flow import FlowState
from actionspace.policy.labels import Label
from actionspace.policy.provenance import infer
from actionspace.policy.provenance_stage import evidence_of
from actionspace.service.resume_evidence import HeldProposal, held_proposal, restore
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

WORDS = [
    "acct-EVIL-771",
    "acct-BOB-42",
    "42",
    "Friday",
    "https://evil.example/pay",
    "bob@x.org",
    "wire",
    "to",
]
UNTRUSTED = Label(confidentiality="internal", integrity="untrusted")

leaf = st.one_of(
    st.sampled_from(WORDS),
    st.lists(st.sampled_from(WORDS), min_size=2, max_size=4).map(" ".join),
    st.integers(min_value=0, max_value=100),
)
data = st.dictionaries(
    st.sampled_from(["body", "account", "note", "a, b", "x/y"]), leaf, min_size=1, max_size=3
)
observations = st.lists(st.tuples(data, st.booleans()), min_size=1, max_size=4)
value = st.one_of(leaf, st.lists(leaf, max_size=3), st.dictionaries(st.sampled_from(WORDS), leaf, max_size=2))
arguments = st.dictionaries(st.sampled_from(["to", "amount", "memo"]), value, min_size=1, max_size=3)


def _kinds(flow: FlowState, args: dict[str, Any]) -> dict[str, list[tuple[str, bool, bool, str]]]:
    found = infer(evidence_of(flow), args)
    return {a: [(vp.path, vp.key, vp.embedded, vp.source.kind) for vp in vps] for a, vps in found.items()}


@settings(max_examples=150, deadline=None)
@given(observations, arguments, st.sampled_from(["t", "call, 1", "user"]))
def test_restored_evidence_gives_each_value_the_kind_it_was_judged_with(
    shown: list[tuple[dict[str, Any], bool]], args: dict[str, Any], prefix: str
) -> None:
    before = FlowState()
    for i, (body, untrusted) in enumerate(shown):
        label = UNTRUSTED if untrusted else Label()
        before.observed_as(Observation(call_id=f"{prefix}{i}", tool="read", data=body), label)
    judged = infer(evidence_of(before), args)
    recorded = json.loads(json.dumps({a: [vp.to_dict() for vp in vps] for a, vps in judged.items()}))
    after = FlowState.from_state(json.loads(json.dumps(before.to_state())))
    known = frozenset(f"{prefix}{i}" for i in range(len(shown)))
    held = HeldProposal(call_id="p1", provenance=recorded, known=known)
    assert restore(after, held, args, "apr_1") is None
    assert _kinds(after, args) == _kinds(before, args)
    assert after.context == before.context


def _event(seq: int, kind: str, call_id: str | None, data: dict[str, Any]) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=0.0, call_id=call_id, data=data)


def _request(arguments: dict[str, Any]) -> ApprovalRequest:
    return ApprovalRequest(
        id="apr_1",
        run_id="r",
        node_id="c2",
        tool="pay@1",
        args_digest="d",
        arguments=arguments,
        provenance={},
    )


def test_a_proposal_the_store_cut_short_refuses_the_resume() -> None:
    events = [
        _event(1, "proposed", "p1", {"tool": "pay", "$truncated": {"chars": 10}}),
        _event(2, "approval_requested", "p1", {"request_id": "apr_1"}),
    ]
    found = held_proposal(events, _request({"to": "acct-EVIL-771"}))
    assert isinstance(found, ActionError) and found.category == "policy_violation"
    assert found.details["call_id"] == "p1"


def test_a_proposal_of_other_arguments_refuses_the_resume() -> None:
    events = [
        _event(1, "proposed", "p1", {"tool": "pay", "arguments": {"to": "a"}, "provenance": {"to": []}}),
        _event(2, "approval_requested", "p1", {"request_id": "apr_1"}),
    ]
    found = held_proposal(events, _request({"to": "b"}))
    assert isinstance(found, ActionError) and found.category == "policy_violation"


def test_a_recorded_source_naming_no_value_of_the_argument_refuses_the_resume() -> None:
    recorded = {"to": [{"path": "/0", "source": "untrusted(m1, /body)"}]}
    held = HeldProposal(call_id="p1", provenance=recorded, known=frozenset({"m1"}))
    error = restore(FlowState(), held, {"to": "acct-EVIL-771"}, "apr_1")
    assert error is not None and error.category == "policy_violation"


def test_a_call_without_a_recorded_provenance_is_resumed_as_before() -> None:
    events = [
        _event(1, "proposed", "p1", {"tool": "pay", "arguments": {"to": "a"}}),
        _event(2, "approval_requested", "p1", {"request_id": "apr_1"}),
    ]
    found = held_proposal(events, _request({"to": "a"}))
    assert isinstance(found, HeldProposal) and found.provenance is None and found.call_id == "p1"
    lost = held_proposal(events[:1], _request({"to": "a"}))  # filed, its trace never written
    assert isinstance(lost, ActionError) and lost.category == "policy_violation"
