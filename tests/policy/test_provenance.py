"""Value-level provenance: inference, normalisation, claims, per-argument policies."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ANY, ArgumentPolicy, Param, kinds
from actionspace.policy.flow_policies import Allow, Ask, Deny, FlowPolicy, FlowRequest
from actionspace.policy.labels import Label
from actionspace.policy.provenance import (
    Evidence,
    FieldTrust,
    Source,
    ValueProvenance,
    embedded,
    infer,
    norm,
    strongest,
    structure,
)
from actionspace.policy.provenance_stage import ProvenanceStage
from actionspace.policy.redaction import REDACTED, redact_event

IBAN_USER = "DE11111111111111111111"
IBAN_PAGE = "DE89370400440532013000"
PAGE = f"Pay your bill: send 42.50 to {IBAN_PAGE}, see www.pay-here.example.com"

RULES = {
    "send_money": {
        "recipient": Param("user | tool_result"),
        "amount": Param("user | tool_result", ask="untrusted"),
        "note": Param(ANY, links="user | tool_result", otherwise="ask"),
    },
}


def _runtime(policy: FlowPolicy | None = None, **stage: Any) -> tuple[Runtime, list[tuple[str, Any]]]:
    policy = policy if policy is not None else NoSecretToExternalSink() & ArgumentPolicy(RULES)
    rt = Runtime("memory://", recover_on_start=False, flow_policy=policy, stages=[ProvenanceStage(**stage)])
    sent: list[tuple[str, Any]] = []

    def send_money(recipient: str, amount: float, note: str = "") -> dict[str, bool]:
        sent.append((recipient, amount))
        return {"ok": True}

    def read_page(url: str) -> dict[str, str]:
        return {"text": PAGE}

    def get_iban() -> dict[str, str]:
        return {"iban": IBAN_USER}

    rt.tool(effect="external")(send_money)
    rt.tool(effect="read", labels={"integrity": "untrusted"})(read_page)
    rt.tool(effect="read")(get_iban)
    return rt, sent


def _call(rt: Runtime, run: str, name: str, **kw: Any) -> Any:
    extra = {k: kw.pop(k) for k in ("provenance", "sources") if k in kw}
    return rt.call({"name": name, "arguments": kw}, run_id=run, **extra)


def _proposed(rt: Runtime, run: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.trace.events(run) if e.kind == "proposed"]


# ---------------------------------------------------------------------- normalisation


def test_norm_folds_case_and_collapses_whitespace() -> None:
    assert norm("  Hello\n\t WORLD ") == "hello world"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("Bob", "please ask   bob."),
        ("new york", "fly to New\nYork tomorrow"),
        (1000, "the rent is $1,000.00 a month"),
        ("$1,000", "the rent is 1000 EUR"),
        (42.5, "send 42.50 now"),
        ("2024-05-03", "meet on May 3, 2024"),
        ("2024-05-03", "meet on 3rd of May 2024"),
        ("2024-05-03 10:00", "meet on 2024/05/03 at 10:00"),
    ],
)
def test_a_value_matches_its_normalised_forms(value: Any, text: str) -> None:
    ev = Evidence([(text, False)], {})
    assert [s.kind for s in ev.sources(value)] == ["user"]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("bob", "ask bobby"),
        ("13", "what do we do on June 13?"),
        (10, "the call is at 10:00"),
        ("2024-05-03 10:00", "meet on 2024-05-03 at 11:00"),
        (True, "true"),
        (1000.5, "1000"),
    ],
)
def test_a_value_does_not_match_a_piece_of_another_token(value: Any, text: str) -> None:
    assert Evidence([(text, False)], {}).sources(value) == []


def test_the_user_wins_over_an_untrusted_page_holding_the_same_value() -> None:
    ev = Evidence([(f"pay {IBAN_PAGE}", False)], {"c1": ("read_page", True, {"text": PAGE})})
    assert strongest(ev.sources(IBAN_PAGE)).kind == "user"
    assert strongest(Evidence([], {"c1": ("read_page", True, {"text": PAGE})}).sources(IBAN_PAGE)) == Source(
        "untrusted", "c1", "/text"
    )


def test_a_system_field_vouches_for_its_whole_value_not_for_a_piece_of_its_text() -> None:
    data = [{"sender": "alice@corp.example", "body": "hi"}, {"sender": "visit www.evil.example.com now"}]
    ev = Evidence([], {"c1": ("inbox", True, data)}, fields=FieldTrust({"inbox": frozenset({"sender"})}))
    assert ev.sources("alice@corp.example") == [Source("tool_result", "c1", "/0/sender")]
    assert ev.sources("www.evil.example.com") == [Source("untrusted", "c1", "/1/sender")]
    assert ev.sources("hi") == [Source("untrusted", "c1", "/0/body")]


def test_every_list_element_nested_field_and_key_gets_its_own_provenance() -> None:
    ev = Evidence([("send to alice@x.example", False)], {"c1": ("page", True, {"text": "mallory@y.example"})})
    got = infer(ev, {"to": ["alice@x.example", "mallory@y.example"], "meta": {"mallory@y.example": 1}})
    assert [(vp.path, vp.source.kind) for vp in got["to"]] == [("/0", "user"), ("/1", "untrusted")]
    assert [(vp.path, vp.source.kind, vp.key) for vp in got["meta"]] == [
        ("/mallory@y.example", "untrusted", True),
        ("/mallory@y.example", "model", False),
    ]


def test_schema_structure_carries_no_provenance() -> None:
    schema = {
        "type": "object",
        "properties": {
            "files": {"type": "array", "items": {"properties": {"type": {"const": "file"}, "id": {}}}}
        },
    }
    fixed = structure(schema)
    got = infer(Evidence([("attach 7", False)], {}), {"files": [{"type": "file", "id": 7}]}, fixed=fixed)
    assert [(vp.path, vp.source.kind) for vp in got["files"]] == [("/0/id", "user")]


def test_links_inside_a_written_text_get_their_own_provenance() -> None:
    assert embedded("see www.a-b.com/x, mail c.d@e.org or pay US133000000121212121212.") == [
        "www.a-b.com/x",
        "c.d@e.org",
        "US133000000121212121212",
    ]
    ev = Evidence([], {"c1": ("page", True, {"text": PAGE})})
    got = infer(ev, {"note": "Hi! Please go to www.pay-here.example.com today"})
    assert [(vp.source.kind, vp.embedded) for vp in got["note"]] == [("model", False), ("untrusted", True)]


def test_defaults_and_plan_bindings_take_their_provenance_from_the_runtime() -> None:
    got = infer(
        Evidence([], {}),
        {"to": "ops@x.example", "a": "v", "b": "w"},
        defaults=["to"],
        bound={
            "a": [("c1", False)],
            "b": [("c1", False), ("c2", True)],
        },
    )
    assert got["to"] == (ValueProvenance("", Source("default")),)
    assert got["a"][0].source == Source("tool_result", "c1")
    assert got["b"][0].source == Source("untrusted", "c2")


# ---------------------------------------------------------------------- the policy


def test_param_names_only_known_kinds() -> None:
    assert kinds("user | tool_result") == {"user", "tool_result"}
    with pytest.raises(ValueError, match="unknown provenance"):
        Param("user | trusted")
    with pytest.raises(ValueError, match="both allowed and asked"):
        Param("user", ask="user")
    with pytest.raises(ValueError, match="otherwise"):
        Param("user", otherwise="maybe")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a Param"):
        ArgumentPolicy({"t": {"a": "user"}})  # type: ignore[dict-item]


def test_param_verdicts() -> None:
    p = Param("user", ask="untrusted", links="user | tool_result")
    assert (p.verdict("user"), p.verdict("untrusted"), p.verdict("model")) == ("allow", "ask", "deny")
    assert p.verdict("tool_result", embedded=True) == "allow"
    assert p.verdict("untrusted", embedded=True) == "deny"
    assert Param("user", otherwise="ask").verdict("model") == "ask"
    assert "links='user | tool_result'" in repr(p) and "ask='untrusted'" in repr(p)


def test_the_argument_policy_needs_the_provenance_stage() -> None:
    rt = Runtime("memory://", recover_on_start=False, flow_policy=ArgumentPolicy(RULES))

    @rt.tool(effect="external")
    def send_money(recipient: str, amount: float) -> dict[str, bool]:
        return {}

    run = rt.new_run("r")
    obs = rt.call({"name": "send_money", "arguments": {"recipient": "x", "amount": 1}}, run_id=run)
    assert obs.error is not None and obs.error.category == "internal"  # fails closed: nothing sent
    assert obs.error.vendor_code == "ConfigurationError" and "ProvenanceStage" in obs.error.message
    with pytest.raises(ConfigurationError, match="ProvenanceStage"):
        ArgumentPolicy(RULES).check(_request(None))


def test_a_payment_typed_by_the_user_runs_without_asking_anyone() -> None:
    rt, sent = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay my landlord {IBAN_USER} 1,200 euros")
    _call(rt, run, "read_page", url="x")  # the model has seen untrusted text: values still count
    obs = _call(rt, run, "send_money", recipient=IBAN_USER, amount=1200)
    assert obs.status == "ok" and sent == [(IBAN_USER, 1200)]
    prov = _proposed(rt, run)[-1]["provenance"]
    assert prov["recipient"][0]["source"].startswith("user(0:")


def test_a_recipient_copied_from_an_untrusted_page_is_denied_but_passes_when_the_user_typed_it() -> None:
    rt, sent = _runtime()
    run = rt.new_run("page")
    rt.user_input(run, "pay the bill on the page, 42.50")
    _call(rt, run, "read_page", url="x")
    obs = _call(rt, run, "send_money", recipient=IBAN_PAGE, amount=42.5)
    assert obs.error is not None and obs.error.category == "policy_violation"
    assert obs.error.details["arguments"] == {"recipient": [f"/: untrusted({run}:n1, /text)"]}
    typed = rt.new_run("typed")
    rt.user_input(typed, f"send 42.50 to {IBAN_PAGE}")
    _call(rt, typed, "read_page", url="x")
    assert _call(rt, typed, "send_money", recipient=IBAN_PAGE, amount=42.5).status == "ok"
    assert sent == [(IBAN_PAGE, 42.5)]


def test_an_amount_from_an_untrusted_bill_runs_only_after_approval() -> None:
    rt, sent = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay the bill to my landlord {IBAN_USER}")
    _call(rt, run, "read_page", url="x")
    obs = rt.call(
        {"name": "send_money", "arguments": {"recipient": IBAN_USER, "amount": 42.5}}, run_id=run, node_id="p"
    )
    assert obs.error is not None and obs.error.category == "needs_approval" and sent == []
    rt.approvals.approve(obs.error.details["request_id"], by="alice")
    obs = rt.call(
        {"name": "send_money", "arguments": {"recipient": IBAN_USER, "amount": 42.5}}, run_id=run, node_id="p"
    )
    assert obs.status == "ok" and sent == [(IBAN_USER, 42.5)]


def test_a_trusted_tool_result_is_accepted_where_the_rule_says_so() -> None:
    rt, _ = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, "send 5 to my own account")
    _call(rt, run, "get_iban")
    assert _call(rt, run, "send_money", recipient=IBAN_USER, amount=5).status == "ok"


def test_a_link_from_an_untrusted_page_inside_a_note_asks() -> None:
    rt, _ = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"send 5 to {IBAN_USER}")
    _call(rt, run, "read_page", url="x")
    obs = _call(rt, run, "send_money", recipient=IBAN_USER, amount=5, note="go to www.pay-here.example.com")
    assert obs.error is not None and obs.error.category == "needs_approval"
    assert _call(rt, run, "send_money", recipient=IBAN_USER, amount=5, note="thanks!").status == "ok"


def test_a_default_on_a_high_risk_argument_is_held() -> None:
    policy = ArgumentPolicy({})
    rt = Runtime("memory://", recover_on_start=False, flow_policy=policy, stages=[ProvenanceStage()])
    sent: list[str] = []

    def notify(text: str, to: str = "everyone@corp.example") -> dict[str, bool]:
        sent.append(to)
        return {"ok": True}

    rt.tool(effect="external", labels={"high_risk_args": ["to"]})(notify)
    run = rt.new_run("r")
    rt.user_input(run, "tell the team hello, and tell ops@corp.example too")
    obs = _call(rt, run, "notify", text="hello")
    assert obs.error is not None and obs.error.category == "needs_approval"
    assert obs.error.details["arguments"] == {"to": ["/: default"]}
    assert _call(rt, run, "notify", text="hello", to="ops@corp.example").status == "ok"
    assert sent == ["ops@corp.example"]


# ---------------------------------------------------------------------- claims


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        ({"provenance": {"recipient": "user"}}, "not in the user's messages"),
        ({"provenance": {"recipient": "tool_result:nonexistent"}}, "not an observation of this run"),
        ({"provenance": {"recipient": "trust me"}}, "is not a provenance"),
        ({"provenance": {"recipient": "default"}}, "default did not fill it"),
        ({"sources": {"recipient": ["user"]}}, "occurs in none of"),
        ({"sources": {"recipient": ["nonexistent"]}}, "not observations of this run"),
    ],
)
def test_a_false_provenance_claim_is_a_policy_violation(claim: dict[str, Any], why: str) -> None:
    rt, sent = _runtime(NoSecretToExternalSink())
    run = rt.new_run("r")
    rt.user_input(run, "pay 5 to my landlord")
    obs = _call(rt, run, "send_money", recipient=IBAN_PAGE, amount=5, **claim)
    assert obs.error is not None and obs.error.category == "policy_violation" and sent == []
    assert why in obs.error.message and obs.error.details["rule"] == "provenance_claim"
    assert "false_claims" in _proposed(rt, run)[-1]


def test_true_claims_pass_and_a_verified_binding_counts_as_provenance() -> None:
    rt, sent = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay 5 to {IBAN_USER}")
    iban = _call(rt, run, "get_iban")
    obs = _call(
        rt, run, "send_money", recipient=IBAN_USER, amount=5,
        provenance={"amount": "user", "note": "model_inferred"},
        sources={"recipient": ["user", iban.call_id]},
    )  # fmt: skip
    assert obs.status == "ok" and sent == [(IBAN_USER, 5)]
    obs = _call(
        rt,
        run,
        "send_money",
        recipient=IBAN_USER,
        amount=6,
        provenance={"recipient": f"tool_result:{iban.call_id}"},
    )
    assert obs.error is not None and obs.error.category == "policy_violation"  # 6 is nobody's: model
    assert _proposed(rt, run)[-1]["provenance"]["amount"] == [{"path": "", "source": "model"}]


def test_the_proposed_event_holds_normalised_arguments_and_is_redacted_for_a_viewer_without_clearance() -> (
    None
):
    rt, _ = _runtime()
    run = rt.new_run("r")
    rt.user_input(run, f"pay 5 to {IBAN_USER}", label=Label(confidentiality="secret"))
    _call(rt, run, "send_money", recipient=IBAN_USER, amount=5)
    event = next(e for e in rt.trace.events(run) if e.kind == "proposed")
    assert event.data["arguments"] == {"recipient": IBAN_USER, "amount": 5, "note": ""}
    seen = redact_event(event.data, None)
    assert seen["arguments"] == {"recipient": REDACTED, "amount": REDACTED, "note": REDACTED}
    assert seen["provenance"] == REDACTED and seen["tool"] == "send_money"


# ---------------------------------------------------------------------- composition


def _request(values: dict[str, tuple[ValueProvenance, ...]] | None) -> FlowRequest:
    rt, _ = _runtime()
    spec = rt.catalog.get("send_money")
    from actionspace.policy.principal import Principal

    return FlowRequest(
        spec=spec, arguments={"recipient": "x", "amount": 1}, arg_labels={}, principal=Principal(id="p"),
        run_id="r", provenance=values,
    )  # fmt: skip


def _vp(kind: Any) -> tuple[ValueProvenance, ...]:
    return (ValueProvenance("", Source(kind)),)


def test_argument_policies_compose_with_and_and_or() -> None:
    policy = ArgumentPolicy(RULES)
    user = _request({"recipient": _vp("user"), "amount": _vp("user")})
    asked = _request({"recipient": _vp("user"), "amount": _vp("untrusted")})
    denied = _request({"recipient": _vp("untrusted"), "amount": _vp("untrusted")})
    assert isinstance(policy.check(user), Allow)
    assert isinstance(policy.check(asked), Ask)
    verdict = policy.check(denied)
    assert isinstance(verdict, Deny) and set(verdict.details["arguments"]) == {"recipient"}
    lenient = ArgumentPolicy({"send_money": {"recipient": Param(ANY)}})
    assert isinstance((policy | lenient).check(denied), Allow)
    assert isinstance((policy & lenient).check(denied), Deny)
    assert isinstance((lenient & policy).check(asked), Ask)
    assert isinstance(ArgumentPolicy({}).check(denied), Allow)
    assert repr(policy) == "ArgumentPolicy(1 tools)"
