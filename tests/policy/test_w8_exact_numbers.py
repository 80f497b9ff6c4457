"""Numbers are matched exactly: a long account number one digit off is not the user's, and a number
no float can hold is judged like any other value, never an unhandled error."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy import NoSecretToExternalSink
from actionspace.policy.arguments import ArgumentPolicy, Param
from actionspace.policy.matching import number, prepare
from actionspace.policy.occurrence import occurs
from actionspace.policy.provenance import Evidence, infer
from actionspace.policy.provenance_stage import ProvenanceStage

USER_ACCOUNT = 12345678901234567890


def _kind(evidence: Evidence, value: Any) -> str:
    return infer(evidence, {"a": value})["a"][0].source.kind


def test_an_integer_beyond_float_precision_one_digit_off_is_not_the_users() -> None:
    ev = Evidence([(f"pay account {USER_ACCOUNT} please", False)], {})
    assert _kind(ev, USER_ACCOUNT) == "user"
    assert _kind(ev, USER_ACCOUNT + 1) == "model"
    assert _kind(ev, str(USER_ACCOUNT + 1)) == "model"
    assert _kind(ev, float(USER_ACCOUNT)) == "model"  # the float a tool would get is another number


def test_a_trusted_results_long_number_vouches_only_for_itself() -> None:
    ev = Evidence([], {"c1": ("lookup", False, {"account": USER_ACCOUNT, "note": f"ref {USER_ACCOUNT}"})})
    assert _kind(ev, USER_ACCOUNT) == "tool_result"
    assert _kind(ev, USER_ACCOUNT - 1) == "model"
    assert _kind(ev, f"${USER_ACCOUNT - 1:,}") == "model"


def test_numbers_of_one_value_still_match_across_spellings() -> None:
    ev = Evidence([("send $1,000.00 and 0.1 and 7", False)], {})
    for value in (1000, 1000.0, "1,000", "$1,000.00", 0.1, "0.10", 7, -0.0 + 7):
        assert _kind(ev, value) == "user", value


def test_huge_numbers_are_judged_not_raised() -> None:
    ev = Evidence([("x " + "9" * 400, False)], {"c1": ("t", True, {"n": "1" * 5000})})
    assert _kind(ev, 10**400) == "model"
    assert _kind(ev, "8" * 400) == "model"  # two numerals too long for a float are not one number
    assert _kind(ev, 1e308) == "model"
    assert number(10**400) == 10**400
    assert number("9" * 5000) is None
    assert prepare("1" * 5000).numbers == frozenset()


def test_sources_check_of_a_huge_integer_is_false_not_an_error() -> None:
    assert occurs(10**400, ["x 1"]) is False
    assert occurs(10**400, [10**400]) is True
    assert occurs(USER_ACCOUNT + 1, [f"account {USER_ACCOUNT}"]) is False


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=2**53, max_value=10**30), st.integers(min_value=1, max_value=1000))
def test_no_two_distinct_integers_are_one_number(n: int, delta: int) -> None:
    ev = Evidence([(f"account {n}", False)], {"c1": ("t", False, {"v": n, "s": f"#{n}"})})
    assert _kind(ev, n) == "user"
    assert _kind(ev, n + delta) == "model"
    assert _kind(ev, str(n + delta)) == "model"


def _runtime() -> tuple[Runtime, list[int]]:
    rules = {"pay": {"account": Param("user | tool_result")}}
    rt = Runtime(
        "memory://",
        recover_on_start=False,
        flow_policy=NoSecretToExternalSink() & ArgumentPolicy(rules),
        stages=[ProvenanceStage()],
    )
    sent: list[int] = []

    @rt.tool(effect="external")
    def pay(account: int) -> str:
        """Pay an account."""
        sent.append(account)
        return "ok"

    return rt, sent


def test_a_payment_to_an_account_one_digit_off_the_users_is_refused() -> None:
    rt, sent = _runtime()
    run = rt.new_run()
    rt.user_input(run, f"pay account {USER_ACCOUNT}")
    off = rt.call({"name": "pay", "arguments": {"account": USER_ACCOUNT + 1}}, run_id=run)
    assert off.error is not None and off.error.category == "policy_violation"
    ok = rt.call({"name": "pay", "arguments": {"account": USER_ACCOUNT}}, run_id=run)
    assert ok.status == "ok"
    assert sent == [USER_ACCOUNT]


def test_a_huge_integer_argument_is_a_typed_refusal_not_an_internal_error() -> None:
    rt, sent = _runtime()
    run = rt.new_run()
    rt.user_input(run, "pay account 1")
    for sources in (None, {"account": ["user"]}):
        obs = rt.call({"name": "pay", "arguments": {"account": 10**400}}, run_id=run, sources=sources)
        assert obs.error is not None and obs.error.category == "policy_violation"
    assert sent == []
