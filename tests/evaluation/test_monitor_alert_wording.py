"""The monitor's alerts count in words a reader reads as written: one call, two calls; never ``call(s)``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.errors import ToolError
from actionspace.evaluation.monitor import MonitorThresholds, monitor


def _report_after(lost: int, rejected: int) -> dict[str, str]:
    """Alert messages by kind, after ``lost`` sends whose answer was lost and ``rejected`` calls
    refused on one field."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="external", idempotency="none")
    def post(text: str, seats: int) -> str:
        """Post a note whose answer gets lost."""
        raise ToolError("unknown_commit", "the board closed the connection after accepting the note")

    for n in range(lost):
        rt.call(ToolCall(name="post", arguments={"text": f"note {n}", "seats": 1}), run_id=f"lost-{n}")
    for n in range(rejected):
        rt.call(ToolCall(name="post", arguments={"text": f"bad {n}", "seats": "many"}), run_id=f"bad-{n}")
    report = monitor(rt.trace, thresholds=MonitorThresholds(min_rejects=1))
    rt.close()
    return {alert.kind: alert.message for alert in report.alerts}


def test_one_unknown_commit_is_one_call_to_reconcile() -> None:
    said = _report_after(lost=1, rejected=0)["unknown_commits"]
    assert said == "1 call of post may or may not have committed; reconcile it"


@settings(max_examples=10, deadline=None)
@given(lost=st.integers(min_value=0, max_value=4), rejected=st.integers(min_value=0, max_value=3))
def test_alert_messages_agree_with_their_counts(lost: int, rejected: int) -> None:
    said = _report_after(lost=lost, rejected=rejected)
    assert not any("(s)" in message for message in said.values()), said
    if lost:
        noun, pronoun = ("call", "it") if lost == 1 else ("calls", "them")
        assert said["unknown_commits"] == (
            f"{lost} {noun} of post may or may not have committed; reconcile {pronoun}"
        )
    if rejected:
        noun, verb = ("rejected call", "fails") if rejected == 1 else ("rejected calls", "fail")
        assert said["field_concentration"] == f"{rejected} of {rejected} {noun} of post {verb} on /seats"
