"""The exact answers of the flow engine: decision details, reasons, and binding edge cases."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Labels, Observation, Provenance, ToolSpec
from actionspace.errors import ToolDefinitionError
from actionspace.policy import (
    ALLOW,
    AllOf,
    AllowAll,
    AnyOf,
    Ask,
    Deny,
    FlowRequest,
    FlowState,
    Label,
    NoSecretToExternalSink,
    Principal,
    ReadClearance,
    ReadersCoverRecipients,
    UntrustedHighRiskArgs,
    UntrustedWrites,
)
from actionspace.policy.flow import argument_labels, bindings, evaluate

SECRET = Label(confidentiality="secret")
UNTRUSTED = Label(integrity="untrusted")
SCHEMA = {"type": "object", "properties": {"recipient": {}, "body": {}}}


def _spec(effect: str = "external", name: str = "mail", **labels: Any) -> ToolSpec:
    return ToolSpec(name=name, effect=effect, input_schema=SCHEMA, labels=Labels(**labels))  # type: ignore[arg-type]


def _req(spec: ToolSpec, labels: dict[str, Label], args: dict[str, Any] | None = None) -> FlowRequest:
    return FlowRequest(
        spec=spec,
        arguments=args if args is not None else {a: "v" for a in labels},
        arg_labels=labels,
        principal=Principal(id="bob"),
        run_id="r",
        origins={a: (("src", lab),) for a, lab in labels.items()},
    )


def test_no_secret_to_external_sink_explains_itself_exactly() -> None:
    decision = NoSecretToExternalSink().check(_req(_spec(), {"recipient": Label(), "body": SECRET}))
    assert decision == Deny(
        "mail sends data out and may receive at most internal data; argument(s) body carry secret data",
        {"rule": "no_secret_to_external_sink", "ceiling": "internal", "arguments": {"body": ["src"]}},
        declassify=True,
    )
    two = NoSecretToExternalSink().check(
        _req(_spec(sink_max="public"), {"recipient": Label(confidentiality="internal"), "body": SECRET})
    )
    assert isinstance(two, Deny)
    assert two.reason.endswith("argument(s) body, recipient carry secret data")
    assert two.details["ceiling"] == "public"
    assert repr(NoSecretToExternalSink(on="ask")) == "NoSecretToExternalSink(on='ask')"


def test_readers_cover_recipients_explains_itself_exactly() -> None:
    only = Label(readers=frozenset({"a@x", "b@x"}))
    decision = ReadersCoverRecipients().check(
        _req(_spec(), {"recipient": Label(), "body": only}, {"recipient": ["a@x", "e@x"], "body": "t"})
    )
    assert decision == Deny(
        "mail would send data readable only by its readers to e@x",
        {
            "rule": "readers_cover_recipients",
            "readers": ["a@x", "b@x"],
            "outside_readers": ["e@x"],
            "arguments": {"body": ["src"]},
        },
    )
    many = ReadersCoverRecipients().check(
        _req(_spec(), {"recipient": Label(), "body": only}, {"recipient": ["e@x", "f@x"], "body": "t"})
    )
    assert isinstance(many, Deny) and many.reason.endswith("to e@x, f@x")
    odd = ReadersCoverRecipients().check(_req(_spec(), {"recipient": only}, {"recipient": 7}))
    assert isinstance(odd, Deny) and odd.reason.endswith("to no recipient argument")


def test_untrusted_argument_policies_explain_themselves_exactly() -> None:
    req = _req(_spec(), {"recipient": UNTRUSTED, "body": UNTRUSTED})
    assert UntrustedHighRiskArgs().check(req) == Ask(
        "high-risk argument(s) recipient of mail derive from untrusted data",
        {"rule": "untrusted_high_risk_args", "arguments": {"recipient": ["src"]}},
    )
    assert UntrustedWrites().check(req) == Ask(
        "mail would write data derived from untrusted content (body, recipient)",
        {"rule": "untrusted_writes", "arguments": {"body": ["src"], "recipient": ["src"]}},
    )
    assert UntrustedWrites(on="deny").check(req) == Deny(
        "mail would write data derived from untrusted content (body, recipient)",
        {"rule": "untrusted_writes", "arguments": {"body": ["src"], "recipient": ["src"]}},
    )
    two = _spec(high_risk_args=("recipient", "body"))
    asked = UntrustedHighRiskArgs().check(_req(two, {"recipient": UNTRUSTED, "body": UNTRUSTED}))
    assert isinstance(asked, Ask) and asked.reason.startswith("high-risk argument(s) recipient, body of")
    assert repr(UntrustedWrites(on="deny")) == "UntrustedWrites(on='deny')"
    assert repr(UntrustedHighRiskArgs()) == "UntrustedHighRiskArgs(on='ask')"
    assert UntrustedWrites().check(_req(_spec(effect="write"), {})) is ALLOW


def test_read_clearance_explains_itself_exactly() -> None:
    spec = _spec(effect="read", name="vault", confidentiality="secret", readers=frozenset({"alice"}))
    decision = ReadClearance().check(_req(spec, {}))
    assert decision == Deny(
        "principal 'bob' may not read secret output of vault",
        {
            "rule": "read_clearance",
            "label": {"confidentiality": "secret", "integrity": "trusted", "readers": ["alice"]},
            "arguments": {},
        },
    )


def test_or_passes_the_request_on_and_merges_what_it_refuses() -> None:
    req = _req(_spec(), {"recipient": UNTRUSTED, "body": SECRET})
    assert (UntrustedWrites(on="deny") | AllowAll()).check(req) is ALLOW
    refused = (NoSecretToExternalSink() | UntrustedWrites(on="deny")).check(req)
    assert isinstance(refused, Deny)
    assert refused.declassify
    assert refused.details["arguments"] == {"body": ["src"], "recipient": ["src"]}
    assert refused.reason.startswith("mail sends data out") and "untrusted content" in refused.reason
    one = AnyOf(NoSecretToExternalSink(), UntrustedWrites(on="ask")).check(req)
    assert isinstance(one, Ask) and one.reason.startswith("mail would write")
    single = AnyOf(NoSecretToExternalSink()).check(req)
    assert isinstance(single, Deny) and single.details["rule"] == "no_secret_to_external_sink"
    assert isinstance(AllOf(UntrustedWrites()).check(req), Ask)


def test_misuse_is_reported_clearly() -> None:
    with pytest.raises(TypeError, match="is not a FlowPolicy"):
        AnyOf(AllowAll(), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on must be 'ask' or 'deny', got 'no'"):
        UntrustedHighRiskArgs(on="no")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="labels="):
        ToolSpec(name="t", effect="read", labels={"colour": "red"})  # type: ignore[arg-type]


def test_tainted_by_falls_back_to_the_context_for_unknown_arguments() -> None:
    req = _req(_spec(), {"body": SECRET})
    assert req.tainted_by("nothing", lambda lab: True) == ["context"]
    assert req.tainted_by("body", lambda lab: False) == ["context"]


def test_bindings_handle_every_argument_shape() -> None:
    labels = {"a": ("call:a", SECRET), "b": ("call:b", UNTRUSTED)}
    seen: list[str] = []

    def source(text: str) -> tuple[str, Label] | None:
        seen.append(text)
        return labels.get(text.split(".")[0])

    raw = {
        "first": "literal",
        "n": 5,
        "whole": {"$ref": "a.data"},
        "pair": {"$ref": "a.data", "x": 1},
        "deep": {"k": [{"$ref": "b.data"}, {"$ref": "a.data"}, {"$ref": "a.data"}]},
        "empty": {"k": []},
        "lost": [{"$ref": "zz.data"}, {"$ref": "a.data"}],
        "last": {"$ref": "b.data"},
    }
    bound = bindings(raw, source)
    assert set(bound) == {"whole", "deep", "last"}
    assert bound["whole"].label == SECRET and bound["whole"].origins == (("call:a", SECRET),)
    assert not bound["whole"].mixed
    assert bound["deep"].label == Label(confidentiality="secret", integrity="untrusted")
    assert bound["deep"].origins == (("call:b", UNTRUSTED), ("call:a", SECRET))
    assert bound["deep"].mixed  # its key "k" was written by the model: the context label joins in
    assert bound["last"].label == UNTRUSTED
    assert "zz.data" in seen and "a.data" in seen
    mixed = bindings({"m": [{"$ref": "a.data"}, "text"], "n": {"$ref": "a.data", "y": 2}}, source)
    assert mixed["m"].mixed
    assert "n" not in mixed  # {"$ref", "y"} is an object, not a reference


def test_a_value_found_in_several_claimed_sources_carries_all_their_labels() -> None:
    state = FlowState()
    state.add_user_input("pay bob")
    for cid, label in (("c1", Label()), ("c2", UNTRUSTED)):
        prov = Provenance(labels=label.tags(), trust=label.integrity)
        state.observed(Observation(call_id=cid, tool="t", data={"who": "bob"}, provenance=prov))
    labels, origins, how = argument_labels(state, {"to": "bob"}, sources={"to": ["gone", "c1", "c2", "user"]})
    assert labels["to"] == UNTRUSTED
    assert how["to"] == ["c1", "c2", "user"]
    assert origins["to"] == (("c1", Label()), ("c2", UNTRUSTED), ("user", Label()))
    labels, _, how = argument_labels(state, {"to": "bob", "x": 1}, sources={"to": []})
    assert how == {"to": ["context"], "x": ["context"]}
    assert labels["to"] == UNTRUSTED


def test_evaluate_hands_the_policy_the_principal_and_run() -> None:
    state = FlowState()
    spec = _spec(effect="read", name="vault", confidentiality="secret")
    alice = Principal(id="alice", scopes=("labels:secret",))
    check = evaluate(ReadClearance(), state, spec, {}, principal=alice, run_id="run-7")
    assert check.decision is ALLOW
    assert check.request.run_id == "run-7" and check.request.principal is alice
    assert check.output == SECRET
    assert evaluate(None, state, spec, {}, principal=Principal(id="x"), run_id="r").decision is ALLOW


def test_label_readers_from_dicts_and_tags_default_sensibly() -> None:
    assert Label.from_dict({}) == Label()
    assert Label.from_dict({"readers": ["a", 1]}).readers == frozenset({"a", "1"})
    assert Label.from_tags(("secret",)) == SECRET
    assert Label.from_tags(("secret",), "untrusted").untrusted
