"""Plan nodes' events are marked with their own output label when stored: the shortcut that looks
only at restricted labels marks exactly what marking every record marks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actionspace.policy.labels import Label
from actionspace.trace.events import EventRecord
from actionspace.trace.recorder import _all_marked, _marked

labels = st.builds(
    Label,
    confidentiality=st.sampled_from(["public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "untrusted"]),
    readers=st.one_of(st.none(), st.frozensets(st.sampled_from(["ann", "bob"]), max_size=2)),
)
call_ids = st.sampled_from([None, "c0", "c1", "c2", "c3"])


@given(
    context=labels,
    pending=st.dictionaries(st.sampled_from(["c0", "c1", "c2"]), labels, max_size=3),
    calls=st.lists(call_ids, max_size=8),
)
def test_marking_only_restricted_calls_marks_what_marking_every_record_marks(
    context: Label, pending: dict[str, Label], calls: list[str | None]
) -> None:
    records: list[EventRecord] = [
        (i, "dispatched", 1.0, call_id, {"tool": "t"}) for i, call_id in enumerate(calls)
    ]
    want = [_marked(r, context, pending) for r in records]
    assert _all_marked(records, context, pending) == want


def test_a_secret_nodes_events_carry_its_label_and_the_others_are_left_alone() -> None:
    secret = Label(confidentiality="secret")
    records: list[EventRecord] = [
        (0, "dispatched", 1.0, "c0", {"tool": "t"}),
        (1, "dispatched", 1.0, "c1", {"tool": "t"}),
    ]
    out = _all_marked(records, Label(confidentiality="internal"), {"c0": secret, "c1": Label()})
    assert out[0][4]["label"]["confidentiality"] == "secret"
    assert out[1] is records[1] and "label" not in out[1][4]
