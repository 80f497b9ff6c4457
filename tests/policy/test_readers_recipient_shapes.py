"""Reader-restricted data goes only to its readers, whatever shape the recipient argument takes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Labels, Runtime
from actionspace.catalog.spec import ToolSpec
from actionspace.policy import NoSecretToExternalSink, Principal, ReadersCoverRecipients
from actionspace.policy.flow import ALLOW, Deny, FlowRequest
from actionspace.policy.labels import Label
from actionspace.policy.occurrence import scalars

ALICE = "alice@corp.com"
ALICE_ONLY = Label(confidentiality="internal", readers=frozenset({ALICE, "bob@corp.com"}))
SINK = ToolSpec(
    name="send_email",
    effect="external",
    input_schema={"type": "object", "properties": {"recipients": {}, "body": {}}},
)


def _check(recipients: Any) -> Any:
    request = FlowRequest(
        spec=SINK,
        arguments={"recipients": recipients, "body": "salary"},
        arg_labels={"recipients": Label(), "body": ALICE_ONLY},
        principal=Principal(id="p"),
        run_id="r",
    )
    return ReadersCoverRecipients().check(request)


def test_a_recipient_written_as_an_object_beside_a_reader_is_denied() -> None:
    decision = _check([ALICE, {"email": "eve@evil.com"}])
    assert isinstance(decision, Deny), decision
    assert "eve@evil.com" in decision.details["outside_readers"]


def test_a_recipient_written_as_a_number_beside_a_reader_is_denied() -> None:
    decision = _check([ALICE, 5551234])
    assert isinstance(decision, Deny), decision
    assert decision.details["outside_readers"] == ["5551234"]


def test_readers_as_strings_in_lists_and_objects_are_allowed() -> None:
    assert _check(ALICE) is ALLOW
    assert _check([ALICE, "bob@corp.com"]) is ALLOW
    assert _check([[ALICE], None]) is ALLOW  # an empty slot names nobody


addresses = st.sampled_from([ALICE, "bob@corp.com", "eve@evil.com", "email", "mallory"])
scalar = st.one_of(addresses, st.integers(-5, 5), st.booleans(), st.none())
shapes = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(addresses, inner, max_size=2)),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(recipients=shapes)
def test_data_is_allowed_only_when_every_recipient_named_anywhere_is_a_reader(recipients: Any) -> None:
    named = [leaf for leaf in scalars(recipients) if leaf is not None]
    decision = _check(recipients)
    if named and all(isinstance(leaf, str) and leaf in ALICE_ONLY.readers for leaf in named):  # type: ignore[operator]
        assert decision is ALLOW
    else:
        assert isinstance(decision, Deny), (recipients, decision)


def test_a_runtime_sends_nothing_to_a_recipient_hidden_in_an_object() -> None:
    rt = Runtime("memory://", flow_policy=NoSecretToExternalSink() & ReadersCoverRecipients())
    outbox: list[Any] = []

    @rt.tool(effect="read", labels=Labels(readers=frozenset({ALICE})))
    def read_salary() -> str:
        """Alice's salary: only Alice may read it."""
        return "123456"

    @rt.tool(effect="external")
    def send_email(recipients: list[Any], body: str) -> str:
        """Send an email."""
        outbox.append(recipients)
        return "sent"

    run = rt.new_run()
    assert rt.call({"name": "read_salary", "arguments": {}}, run_id=run).ok
    leak = {"recipients": [ALICE, {"email": "eve@evil.com"}], "body": "123456"}
    obs = rt.call({"name": "send_email", "arguments": leak}, run_id=run)
    assert obs.error is not None and obs.error.category == "policy_violation", obs
    fine = rt.call({"name": "send_email", "arguments": {"recipients": [ALICE], "body": "123456"}}, run_id=run)
    assert fine.ok, fine.error
    assert outbox == [[ALICE]]
