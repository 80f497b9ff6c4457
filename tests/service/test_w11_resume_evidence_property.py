"""Restored evidence judges every value as it was judged before the restart, vouched fields included,
and a record tampered with never judges a value more trusted than it was."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from actionspace.approval.requests import ApprovalRequest
from actionspace.policy.flow import FlowState
from actionspace.policy.labels import Label
from actionspace.policy.provenance import FieldTrust, infer
from actionspace.policy.provenance_stage import evidence_of
from actionspace.service.resume_evidence import HeldProposal, held_proposal, restore
from actionspace.trace.events import TraceEvent
from actionspace.types import Observation

WORDS = ["acct-EVIL-771", "acct-BOB-42", "42", "bob@x.org", "Friday", "wire", "0", "sender"]
FIELDS = FieldTrust({"read_mail": frozenset({"sender", "a, b"})})
UNTRUSTED = Label(confidentiality="internal", integrity="untrusted")
RANK = {"user": 0, "tool_result": 1, "default": 2, "model": 3, "untrusted": 4}
"""How much a value is trusted, most first (a policy refuses ``untrusted`` before ``model``)."""

FIELD_NAMES = ["sender", "body", "a, b", "x/y", "0"]


def _leaf(words: list[str]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(words),
        st.lists(st.sampled_from(words), min_size=2, max_size=3).map(" ".join),
        st.integers(min_value=1, max_value=50),
    )


def _shown(words: list[str], keys: list[str]) -> st.SearchStrategy[list[tuple[Any, bool, str]]]:
    record = st.dictionaries(st.sampled_from(FIELD_NAMES), _leaf(words), min_size=1, max_size=3)
    output = st.one_of(
        record, st.lists(record, min_size=1, max_size=3), st.dictionaries(st.sampled_from(keys), record)
    )
    tool = st.sampled_from(["read_mail", "read_spam"])
    return st.lists(st.tuples(output, st.booleans(), tool), min_size=1, max_size=3)


def _arguments(words: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    leaf = _leaf(words)
    value = st.one_of(
        leaf, st.lists(leaf, max_size=3), st.dictionaries(st.sampled_from(words), leaf, max_size=2)
    )
    return st.dictionaries(st.sampled_from(["to", "amount", "memo"]), value, min_size=1, max_size=3)


VALUES = [w for w in WORDS if w not in FIELD_NAMES]
"""Values that are no field's name: an output's keys and values apart, as in a tool's output."""


def _kinds(
    flow: FlowState, args: dict[str, Any], tools: dict[str, str] | None = None
) -> dict[tuple[str, str, bool, bool], str]:
    """Each value's provenance kind; ``tools``: the stage's own call id → tool map (the process
    that saw the calls proposed has one; a process resuming the held call has none)."""
    found = infer(evidence_of(flow, tools, FIELDS), args)
    return {(a, vp.path, vp.key, vp.embedded): vp.source.kind for a, vps in found.items() for vp in vps}


def _event(seq: int, kind: str, call_id: str, data: dict[str, Any]) -> TraceEvent:
    return TraceEvent(run_id="r", seq=seq, kind=kind, ts=0.0, call_id=call_id, data=data)


def _before(outputs: list[tuple[Any, bool, str]], prefix: str) -> FlowState:
    flow = FlowState()
    for i, (data, untrusted, tool) in enumerate(outputs):
        flow.observed_as(
            Observation(call_id=f"{prefix}{i}", tool=tool, data=data), UNTRUSTED if untrusted else Label()
        )
    return flow


def _resumed(
    before: FlowState, args: dict[str, Any], recorded: Any, tools: list[tuple[str, str]]
) -> FlowState:
    events = [_event(i, "observation", cid, {"status": "ok", "tool": t}) for i, (cid, t) in enumerate(tools)]
    events.append(
        _event(len(events), "proposed", "p1", {"tool": "pay", "arguments": args, "provenance": recorded})
    )
    events.append(_event(len(events), "approval_requested", "p1", {"request_id": "apr_1"}))
    request = ApprovalRequest(
        id="apr_1", run_id="r", node_id="p1", tool="pay@1", args_digest="d", arguments=args, provenance={}
    )
    held = held_proposal(events, request)
    assert isinstance(held, HeldProposal)
    after = FlowState.from_state(json.loads(json.dumps(before.to_state())))
    assert restore(after, held, args, "apr_1") is None
    return after


@settings(max_examples=200, deadline=None)
@given(_shown(VALUES, ["id-1", "id-2"]), _arguments(VALUES), st.sampled_from(["m", "call, 1"]))
def test_restored_evidence_judges_each_value_as_before_vouched_fields_included(
    outputs: list[tuple[Any, bool, str]], args: dict[str, Any], prefix: str
) -> None:
    before = _before(outputs, prefix)
    tools = [(f"{prefix}{i}", tool) for i, (_d, _u, tool) in enumerate(outputs)]
    judged = infer(evidence_of(before, dict(tools), FIELDS), args)
    recorded = json.loads(json.dumps({a: [vp.to_dict() for vp in vps] for a, vps in judged.items()}))
    after = _resumed(before, args, recorded, tools)
    kinds = _kinds(before, args, dict(tools))
    event("vouched" if any(k == "tool_result" for k in kinds.values()) else "not vouched")
    assert _kinds(after, args) == kinds
    assert after.context == before.context


tamper = st.one_of(
    st.tuples(
        st.just("path"), st.sampled_from(["/0/sender", "/sender", "/a, b", "/1/sender/0", "/", "/99999"])
    ),
    st.tuples(st.just("kind"), st.sampled_from(["tool_result", "untrusted"])),
    st.tuples(st.just("tool"), st.sampled_from(["read_mail", "read_spam", ""])),
)


@settings(max_examples=200, deadline=None)
@given(_shown(WORDS, WORDS), _arguments(WORDS), st.lists(st.tuples(st.integers(0, 20), tamper), max_size=4))
def test_a_tampered_record_never_judges_a_value_more_trusted_than_the_stage_would(
    outputs: list[tuple[Any, bool, str]], args: dict[str, Any], changes: list[tuple[int, tuple[str, str]]]
) -> None:
    """Whatever the record says, a restored value is at most as trusted as the stage judges it on
    the outputs the record claims (the fields and tools it names), and never more than the tool's
    label allows: a value of an untrusted call is ``tool_result`` only through a field the tool's
    ``FieldTrust`` names, at the path the record names."""
    before = _before(outputs, "m")
    judged = infer(evidence_of(before, {f"m{i}": t for i, (_d, _u, t) in enumerate(outputs)}, FIELDS), args)
    recorded = json.loads(json.dumps({a: [vp.to_dict() for vp in vps] for a, vps in judged.items()}))
    entries = [e for vps in recorded.values() for e in vps if "(" in e["source"]]
    tools = [(f"m{i}", tool) for i, (_d, _u, tool) in enumerate(outputs)]
    for n, (what, new) in changes:
        if what == "tool":
            tools.append((f"m{n % len(outputs)}", new))
        elif entries:
            entry = entries[n % len(entries)]
            kind, _, rest = entry["source"].partition("(")
            call_id, _, path = rest[:-1].partition(", ")
            entry["source"] = (
                f"{new if what == 'kind' else kind}({call_id}, {new if what == 'path' else path})"
            )
    after = _resumed(before, args, recorded, tools)
    untrusted_calls = {f"m{i}" for i, (_d, u, _t) in enumerate(outputs) if u}
    named = {cid: {t for c, t in tools if c == cid and t} for cid in {c for c, _ in tools}}
    claimed = {e["source"] for es in recorded.values() for e in es}
    for vps in infer(evidence_of(after, None, FIELDS), args).values():
        for vp in vps:
            source = vp.source
            if source.kind != "tool_result" or source.call_id not in untrusted_calls:
                continue
            # vouched: only what the record claims vouched, by the one tool the trace names
            assert f"tool_result({source.call_id}, {source.path})" in claimed, (vp, claimed)
            assert named.get(source.call_id or "") == {"read_mail"}, (vp, named)
            path = source.path
            assert FIELDS.trusted("read_mail", path) or FIELDS.trusted("read_mail", path.rsplit("/", 1)[0])
