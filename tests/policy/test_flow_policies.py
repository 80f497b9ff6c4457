"""Every flow policy, tested both ways (allow and deny), and their composition with & and |."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from actionspace import Labels, ToolSpec
from actionspace.policy import (
    ALLOW,
    DEFAULT_FLOW_POLICY,
    AllOf,
    Allow,
    AllowAll,
    AnyOf,
    Ask,
    Decision,
    Deny,
    FlowPolicy,
    FlowRequest,
    Label,
    NoSecretToExternalSink,
    Principal,
    ReadClearance,
    ReadersCoverRecipients,
    UntrustedHighRiskArgs,
    UntrustedWrites,
)

SECRET = Label(confidentiality="secret")
INTERNAL = Label(confidentiality="internal")
UNTRUSTED = Label(integrity="untrusted")
TRUSTED = Label()
ALICE_ONLY = Label(confidentiality="internal", readers=frozenset({"alice@x.com"}))


def _spec(
    effect: str = "external", props: tuple[str, ...] = ("recipient", "body"), **labels: Any
) -> ToolSpec:
    schema = {"type": "object", "properties": {p: {} for p in props}}
    return ToolSpec(name="tool", effect=effect, input_schema=schema, labels=Labels(**labels))  # type: ignore[arg-type]


def _req(
    spec: ToolSpec,
    labels: Mapping[str, Label],
    arguments: Mapping[str, Any] | None = None,
    principal: Principal | None = None,
) -> FlowRequest:
    args = dict(arguments) if arguments is not None else {a: "v" for a in labels}
    return FlowRequest(
        spec=spec,
        arguments=args,
        arg_labels=dict(labels),
        principal=principal or Principal(id="p", scopes=("*",)),
        run_id="r",
        origins={a: ((f"src_{a}", lab),) for a, lab in labels.items()},
    )


class Fixed(FlowPolicy):
    def __init__(self, decision: Decision) -> None:
        self.decision = decision

    def check(self, request: FlowRequest) -> Decision:
        return self.decision


ANY_REQ = _req(_spec(), {"body": TRUSTED})


# ---------------------------------------------------------------- NoSecretToExternalSink
def test_no_secret_to_external_sink_allows_internal_data() -> None:
    assert NoSecretToExternalSink().check(_req(_spec(), {"recipient": TRUSTED, "body": INTERNAL})) is ALLOW


def test_no_secret_to_external_sink_denies_secret_data_naming_argument_and_source() -> None:
    decision = NoSecretToExternalSink().check(_req(_spec(), {"recipient": TRUSTED, "body": SECRET}))
    assert isinstance(decision, Deny)
    assert decision.declassify
    assert decision.details["arguments"] == {"body": ["src_body"]}
    assert "body" in decision.reason and "secret" in decision.reason


def test_no_secret_to_external_sink_can_ask_instead() -> None:
    decision = NoSecretToExternalSink(on="ask").check(_req(_spec(), {"body": SECRET}))
    assert isinstance(decision, Ask)
    assert decision.reason.startswith("declassify:")


def test_no_secret_to_external_sink_ignores_non_sinks_and_honours_sink_max() -> None:
    assert NoSecretToExternalSink().check(_req(_spec(effect="write"), {"body": SECRET})) is ALLOW
    assert NoSecretToExternalSink().check(_req(_spec(effect="read"), {"body": SECRET})) is ALLOW
    public_sink = _spec(effect="write", sink_max="public")
    assert isinstance(NoSecretToExternalSink().check(_req(public_sink, {"body": INTERNAL})), Deny)
    assert NoSecretToExternalSink().check(_req(public_sink, {"body": TRUSTED})) is ALLOW
    secret_ok = _spec(sink_max="secret")
    assert NoSecretToExternalSink().check(_req(secret_ok, {"body": SECRET})) is ALLOW
    declared = _spec(effect="write", sink=True)
    assert isinstance(NoSecretToExternalSink().check(_req(declared, {"body": SECRET})), Deny)
    not_a_sink = _spec(sink=False)
    assert NoSecretToExternalSink().check(_req(not_a_sink, {"body": SECRET})) is ALLOW


# ---------------------------------------------------------------- ReadersCoverRecipients
def test_readers_cover_recipients_allows_sending_to_a_reader() -> None:
    req = _req(_spec(), {"recipient": TRUSTED, "body": ALICE_ONLY}, {"recipient": "alice@x.com", "body": "b"})
    assert ReadersCoverRecipients().check(req) is ALLOW


def test_readers_cover_recipients_allows_unrestricted_data_to_anyone() -> None:
    req = _req(_spec(), {"recipient": TRUSTED, "body": INTERNAL}, {"recipient": "eve@x.com", "body": "b"})
    assert ReadersCoverRecipients().check(req) is ALLOW


def test_readers_cover_recipients_denies_a_recipient_outside_the_readers() -> None:
    args = {"recipient": ["alice@x.com", "eve@x.com"], "body": "b"}
    decision = ReadersCoverRecipients().check(_req(_spec(), {"recipient": TRUSTED, "body": ALICE_ONLY}, args))
    assert isinstance(decision, Deny)
    assert not decision.declassify
    assert decision.details["outside_readers"] == ["eve@x.com"]
    assert decision.details["arguments"] == {"body": ["src_body"]}


def test_readers_cover_recipients_denies_a_sink_without_recipients() -> None:
    spec = _spec(props=("url", "body"))
    decision = ReadersCoverRecipients().check(_req(spec, {"url": TRUSTED, "body": ALICE_ONLY}))
    assert isinstance(decision, Deny)
    assert "no recipient argument" in decision.reason


def test_readers_cover_recipients_reads_the_named_recipient_arguments_only() -> None:
    spec = _spec(props=("channel", "body"))
    policy = ReadersCoverRecipients(recipient_args=["channel"])
    args = {"channel": "alice@x.com", "body": "b"}
    assert policy.check(_req(spec, {"channel": TRUSTED, "body": ALICE_ONLY}, args)) is ALLOW
    assert isinstance(
        ReadersCoverRecipients().check(_req(spec, {"channel": TRUSTED, "body": ALICE_ONLY}, args)), Deny
    )
    non_sink = _spec(effect="write")
    assert ReadersCoverRecipients().check(_req(non_sink, {"body": ALICE_ONLY}, {"body": "b"})) is ALLOW


# ---------------------------------------------------------------- UntrustedHighRiskArgs
def test_untrusted_high_risk_args_allows_trusted_recipients() -> None:
    req = _req(_spec(), {"recipient": TRUSTED, "body": UNTRUSTED})
    assert UntrustedHighRiskArgs().check(req) is ALLOW


def test_untrusted_high_risk_args_asks_or_denies_for_an_untrusted_recipient() -> None:
    req = _req(_spec(), {"recipient": UNTRUSTED, "body": TRUSTED})
    asked = UntrustedHighRiskArgs().check(req)
    assert isinstance(asked, Ask)
    assert asked.details["arguments"] == {"recipient": ["src_recipient"]}
    denied = UntrustedHighRiskArgs(on="deny").check(req)
    assert isinstance(denied, Deny)
    assert not denied.declassify


def test_untrusted_high_risk_args_uses_derived_or_declared_argument_names() -> None:
    money = _spec(effect="write", props=("to_iban", "amount", "subject"))
    assert money.labels.high_risk_args == ("to_iban", "amount")
    assert isinstance(UntrustedHighRiskArgs().check(_req(money, {"amount": UNTRUSTED})), Ask)
    assert UntrustedHighRiskArgs().check(_req(money, {"subject": UNTRUSTED})) is ALLOW
    declared = _spec(effect="write", props=("subject",), high_risk_args=("subject",))
    assert isinstance(UntrustedHighRiskArgs().check(_req(declared, {"subject": UNTRUSTED})), Ask)
    reader = _spec(effect="read", props=("url",))
    assert UntrustedHighRiskArgs().check(_req(reader, {"url": UNTRUSTED})) is ALLOW


# ---------------------------------------------------------------- UntrustedWrites
def test_untrusted_writes_allows_trusted_writes_and_untrusted_reads() -> None:
    assert UntrustedWrites().check(_req(_spec(effect="write"), {"body": TRUSTED})) is ALLOW
    assert UntrustedWrites().check(_req(_spec(effect="read"), {"body": UNTRUSTED})) is ALLOW


def test_untrusted_writes_asks_or_denies_any_untrusted_argument() -> None:
    req = _req(_spec(effect="write"), {"recipient": TRUSTED, "body": UNTRUSTED})
    asked = UntrustedWrites().check(req)
    assert isinstance(asked, Ask)
    assert asked.details["arguments"] == {"body": ["src_body"]}
    assert isinstance(UntrustedWrites(on="deny").check(req), Deny)


# ---------------------------------------------------------------- ReadClearance
def test_read_clearance_allows_cleared_readers() -> None:
    spec = _spec(effect="read", confidentiality="secret")
    assert (
        ReadClearance().check(_req(spec, {}, principal=Principal(id="ops", scopes=("labels:secret",))))
        is ALLOW
    )
    shared = _spec(effect="read", readers=frozenset({"alice"}))
    assert ReadClearance().check(_req(shared, {}, principal=Principal(id="alice"))) is ALLOW
    assert ReadClearance().check(_req(_spec(effect="read"), {}, principal=Principal(id="anyone"))) is ALLOW


def test_read_clearance_denies_reading_without_clearance() -> None:
    spec = _spec(effect="read", confidentiality="secret")
    decision = ReadClearance().check(_req(spec, {}, principal=Principal(id="bob", scopes=("read:*",))))
    assert isinstance(decision, Deny)
    assert decision.details["rule"] == "read_clearance"
    shared = _spec(effect="read", readers=frozenset({"alice"}))
    assert isinstance(ReadClearance().check(_req(shared, {}, principal=Principal(id="bob"))), Deny)


# ---------------------------------------------------------------- AllowAll, composition
def test_allow_all_allows_what_the_default_denies() -> None:
    req = _req(_spec(), {"recipient": UNTRUSTED, "body": SECRET})
    assert AllowAll().check(req) is ALLOW
    assert isinstance(DEFAULT_FLOW_POLICY.check(req), Deny)


def test_and_lets_deny_beat_ask_beat_allow() -> None:
    allow, ask, deny = Fixed(ALLOW), Fixed(Ask("a", {"arguments": {"x": ["s1"]}})), Fixed(Deny("d"))
    assert (allow & allow).check(ANY_REQ) is ALLOW
    assert isinstance((allow & ask).check(ANY_REQ), Ask)
    assert isinstance((ask & allow).check(ANY_REQ), Ask)
    assert isinstance((ask & deny).check(ANY_REQ), Deny)
    assert isinstance((deny & allow).check(ANY_REQ), Deny)
    assert isinstance(AllOf(allow, ask, deny).check(ANY_REQ), Deny)


def test_or_lets_either_allow() -> None:
    allow, ask, deny = Fixed(ALLOW), Fixed(Ask("a")), Fixed(Deny("d"))
    assert (deny | allow).check(ANY_REQ) is ALLOW
    assert (allow | deny).check(ANY_REQ) is ALLOW
    assert isinstance((deny | ask).check(ANY_REQ), Ask)
    assert isinstance((deny | deny).check(ANY_REQ), Deny)
    assert isinstance(AnyOf(deny, deny, ask).check(ANY_REQ), Ask)


def test_combined_decisions_merge_reasons_arguments_and_declassifiability() -> None:
    d1 = Fixed(Deny("one", {"arguments": {"a": ["s1"]}}, declassify=True))
    d2 = Fixed(Deny("two", {"arguments": {"a": ["s1", "s2"], "b": ["s3"]}}, declassify=False))
    both = (d1 & d2).check(ANY_REQ)
    assert isinstance(both, Deny)
    assert both.reason == "one; two"
    assert both.details["arguments"] == {"a": ["s1", "s2"], "b": ["s3"]}
    assert not both.declassify
    either = (d1 | d2).check(ANY_REQ)
    assert isinstance(either, Deny) and either.declassify
    assert len(either.details["rules"]) == 2
    a1, a2 = Fixed(Ask("x", {"arguments": {"a": ["s1"]}})), Fixed(Ask("y"))
    asked = (a1 & a2).check(ANY_REQ)
    assert isinstance(asked, Ask) and asked.reason == "x; y"
    asked_any = (a1 | a2).check(ANY_REQ)
    assert isinstance(asked_any, Ask) and asked_any.reason == "x; y"
    both_declassifiable = (d1 & d1).check(ANY_REQ)
    assert isinstance(both_declassifiable, Deny) and both_declassifiable.declassify


def test_composition_flattens_and_reads_back() -> None:
    p = NoSecretToExternalSink() & UntrustedHighRiskArgs(on="deny") & UntrustedWrites()
    assert isinstance(p, AllOf) and len(p.policies) == 3
    assert (
        repr(p)
        == "NoSecretToExternalSink(on='deny') & UntrustedHighRiskArgs(on='deny') & UntrustedWrites(on='ask')"
    )
    q = AllowAll() | ReadersCoverRecipients() | ReadClearance()
    assert isinstance(q, AnyOf) and len(q.policies) == 3
    assert repr(q) == "(AllowAll() | ReadersCoverRecipients() | ReadClearance())"
    with pytest.raises(TypeError):
        AllOf(AllowAll(), "nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        UntrustedWrites(on="maybe")  # type: ignore[arg-type]


def test_the_base_policy_must_be_overridden() -> None:
    with pytest.raises(NotImplementedError):
        FlowPolicy().check(ANY_REQ)


def test_a_request_joins_its_argument_labels_and_names_tainting_sources() -> None:
    req = _req(_spec(), {"recipient": UNTRUSTED, "body": SECRET})
    assert req.joined == Label(confidentiality="secret", integrity="untrusted")
    assert _req(_spec(), {}).joined == Label()
    assert req.tainted_by("body", lambda lab: lab.secret) == ["src_body"]
    assert req.tainted_by("recipient", lambda lab: lab.secret) == ["context"]
    assert req.writes and not _req(_spec(effect="read"), {}).writes
    assert isinstance(DEFAULT_FLOW_POLICY.check(_req(_spec(), {"recipient": TRUSTED})), Allow)
