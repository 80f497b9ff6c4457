"""The flow engine in memory: context labels, source binding, plan bindings, output labels."""

from __future__ import annotations

from typing import Any

from actionspace import Labels, Observation, Provenance, ToolSpec
from actionspace.errors import ActionError
from actionspace.policy import FlowState, Label, label_of
from actionspace.policy.flow import (
    MAX_IDS_PER_LABEL,
    MAX_REMEMBERED,
    Binding,
    argument_labels,
    bindings,
    occurs,
    output_label,
    spec_label,
)

SECRET = Label(confidentiality="secret")
UNTRUSTED = Label(integrity="untrusted")


def _obs(call_id: str, data: Any, label: Label, items: tuple[Observation, ...] = ()) -> Observation:
    prov = Provenance(labels=label.tags(), trust=label.integrity)
    return Observation(call_id=call_id, tool="t", data=data, provenance=prov, items=items)


def test_strings_occur_as_whole_tokens_case_insensitively() -> None:
    assert occurs("bob@x.com", ["send it to Bob@X.com please"])
    assert not occurs("ob@x.co", ["send it to bob@x.com please"])
    assert occurs("Bob", [{"contacts": [{"name": "bob"}]}])
    assert not occurs("bobby", ["bob"])
    assert occurs(["a", "b"], ["a and b"])
    assert not occurs(["a", "c"], ["a and b"])
    assert occurs({"to": "a"}, ["to a"])
    assert not occurs({"to": "a"}, ["a"])  # a key is data: "to" occurs nowhere
    assert not occurs({"hunter2": "a"}, [{"x": "a"}])
    assert occurs({"a": 1}, [{"a": 1}])  # the source's keys are data too


def test_numbers_occur_as_numbers_or_numerals_in_text() -> None:
    assert occurs(100, ["pay 100 to Bob"])
    assert occurs(100.0, [{"amount": 100}])
    assert occurs(12.5, ["12.5 EUR"])
    assert not occurs(1000, ["pay 100 to Bob"])
    assert not occurs(float("nan"), ["nan"])
    assert not occurs(1, [True])


def test_booleans_must_match_and_empty_values_carry_nothing() -> None:
    assert occurs(True, [{"flag": True}])
    assert not occurs(True, [{"flag": False}])
    assert not occurs(True, ["true"])
    assert occurs(None, [])
    assert occurs("", [])
    assert not occurs(object(), ["x"])


def test_everything_shown_joins_the_context_with_its_sources() -> None:
    state = FlowState()
    assert state.context == Label()
    state.add_user_input("hello")
    assert state.context == Label()  # trusted public input changes nothing
    state.observed(_obs("c1", "x", Label(confidentiality="internal")))
    state.observed(_obs("c2", "y", UNTRUSTED))
    assert state.context == Label(confidentiality="internal", integrity="untrusted")
    assert ("c2", UNTRUSTED) in state.origins()
    state.add_user_input("my pin is 1234", SECRET)
    assert state.context.secret
    assert ("user", SECRET) in state.origins()


def test_items_of_a_grouped_observation_join_the_context_one_by_one() -> None:
    state = FlowState()
    inner = _obs("c1", "e", UNTRUSTED)
    outer = _obs("*", None, Label(), items=(inner,))
    state.observed(outer)
    assert state.context.untrusted
    assert state.source("c1") == (UNTRUSTED, ["e"])


def test_a_runtime_error_observation_carries_the_label_its_call_would_have_had() -> None:
    state = FlowState()
    state.pending["c9"] = UNTRUSTED
    err = Observation.failure(ActionError.of("permanent", "boom"), call_id="c9", tool="t")
    assert state.observed(err) == UNTRUSTED
    assert "c9" not in state.pending
    assert (
        state.observed(Observation.failure(ActionError.of("permanent", "x"), call_id="c10", tool="t"))
        == Label()
    )


def test_arguments_carry_the_context_label_unless_bound() -> None:
    state = FlowState()
    state.add_user_input("send to bob@x.com")
    state.observed(_obs("mail", {"body": "send to eve@evil.com"}, UNTRUSTED))
    args = {"to": "bob@x.com", "cc": "eve@evil.com", "body": "hi", "note": "n"}
    labels, origins, how = argument_labels(
        state, args, sources={"to": ["user"], "cc": ["user"], "body": ["nowhere"]}, defaults=["note"]
    )
    assert labels["to"] == Label() and how["to"] == ["user"]
    assert labels["cc"].untrusted and how["cc"] == ["context", "unverified:user"]
    assert labels["body"].untrusted and how["body"] == ["context", "unverified:nowhere"]
    assert labels["note"] == Label() and how["note"] == ["default"]
    assert ("mail", UNTRUSTED) in origins["cc"]


def test_a_value_from_an_earlier_observation_carries_that_observations_label() -> None:
    state = FlowState()
    state.add_user_input("pay my landlord")
    state.observed(_obs("contacts", {"landlord": "DE89 3704"}, Label()))
    state.observed(_obs("mail", {"iban": "XX00 666"}, UNTRUSTED))
    labels, _, how = argument_labels(state, {"iban": "DE89 3704"}, sources={"iban": ["contacts", "mail"]})
    assert labels["iban"] == Label() and how["iban"] == ["contacts"]
    labels, _, _ = argument_labels(state, {"iban": "XX00 666"}, sources={"iban": ["contacts", "mail"]})
    assert labels["iban"].untrusted


def test_plan_bindings_carry_exactly_the_referenced_labels() -> None:
    state = FlowState()
    state.observed(_obs("c0", "seen", UNTRUSTED))
    node_labels = {"n1": ("run:n1", SECRET), "n2": ("run:n2", Label())}

    def source(text: str) -> tuple[str, Label] | None:
        return node_labels.get(text.split(".")[0])

    raw = {
        "a": {"$ref": "n2.data"},
        "b": [{"$ref": "n1.data.x"}, {"$ref": "n2.data"}],
        "c": {"text": {"$ref": "n2.data"}, "extra": "literal"},
        "d": "literal",
        "e": {"$ref": "n9.data"},
    }
    bound = bindings(raw, source)
    assert set(bound) == {"a", "b", "c"}
    assert bound["a"] == Binding(Label(), (("run:n2", Label()),), mixed=False)
    assert bound["b"].label == SECRET and not bound["b"].mixed
    assert bound["c"].mixed
    labels, _, how = argument_labels(state, {k: 1 for k in "abcd"}, bound=bound)
    assert labels["a"] == Label() and how["a"] == ["run:n2"]
    assert labels["b"] == SECRET
    assert labels["c"].untrusted and how["c"] == ["run:n2", "context"]
    assert labels["d"].untrusted


def test_the_output_label_joins_the_tool_label_with_every_argument() -> None:
    spec = ToolSpec(name="t", effect="read", labels=Labels(confidentiality="public", integrity="untrusted"))
    assert spec_label(spec) == UNTRUSTED
    assert output_label(spec, {}) == UNTRUSTED
    assert output_label(spec, {"a": SECRET}) == Label(confidentiality="secret", integrity="untrusted")
    assert label_of(_obs("x", 1, SECRET)) == SECRET


def test_the_state_stays_bounded() -> None:
    state = FlowState()
    for i in range(MAX_REMEMBERED + 10):
        state.observed(_obs(f"c{i}", i, UNTRUSTED))
    assert len(state.seen) == MAX_REMEMBERED
    assert state.source("c0") is None
    assert state.source(f"c{MAX_REMEMBERED + 9}") is not None
    assert len(state.origins()) == MAX_IDS_PER_LABEL
    assert state.source("user") is None
