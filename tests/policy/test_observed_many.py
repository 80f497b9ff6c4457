"""A plan's observations shown to the flow state at once leave it as showing them one by one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actionspace.policy.flow import FlowState
from actionspace.policy.labels import Label
from actionspace.policy.stamped import taken
from actionspace.types import Observation, Provenance

labels = st.builds(
    Label,
    confidentiality=st.sampled_from(["public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "untrusted"]),
    readers=st.one_of(st.none(), st.frozensets(st.sampled_from(["ann", "bob"]), max_size=2)),
)


FEW_IDS = ["c0", "c1", "c2", "c3"]
MANY_IDS = [f"c{i}" for i in range(40)]
"""More call ids than the flow state keeps behind one label (16)."""


@st.composite
def observations(
    draw: st.DrawFn,
    ids: list[str] = FEW_IDS,
    label_of: st.SearchStrategy[Label] = labels,
    refs: list[str | None] = [None, "artifact://sha256/ab", "artifact://sha256/cd"],  # noqa: B006
) -> Observation:
    call_id = draw(st.sampled_from(ids))
    label = draw(label_of)
    if draw(st.booleans()):  # an error made by the runtime: it reads the pending label
        from actionspace.errors import ActionError

        return Observation.failure(
            ActionError.of("transient", "later"), call_id=call_id, tool="t", tool_version="1"
        )
    ref = draw(st.sampled_from(refs))
    provenance = Provenance(fetched_at=1.0, trust=label.integrity, labels=label.tags())
    return Observation(
        call_id=call_id,
        tool="t",
        tool_version="1",
        data=draw(st.integers()),
        content_hash="h",
        provenance=provenance,
        artifact_ref=ref,
    )


def _state(pending: dict[str, Label]) -> FlowState:
    state = FlowState()
    state.pending.update(pending)
    return state


def _shown_both_ways(pending: dict[str, Label], shown: list[Observation]) -> FlowState:
    """Show ``shown`` one by one, at once, and at once from entries taken before, from the same
    pending labels; check all three end alike."""
    one_by_one, at_once, read_before = _state(pending), _state(pending), _state(pending)
    entries = [(obs, taken(obs)) for obs in shown]  # as a plan reads them when its nodes settle
    for obs in shown:
        one_by_one.observed(obs)
    at_once.observed_many(shown)
    read_before.observed_taken(entries)
    assert _view(at_once) == _view(one_by_one)
    assert _view(read_before) == _view(one_by_one)
    return at_once


def _view(state: FlowState) -> tuple[object, ...]:
    return (
        state.context,
        list(state.seen.items()),
        dict(state.pending),
        list(state.artifacts.items()),
        state.origins(),
        state.version,
        state.label_version,
    )


@given(
    pending=st.dictionaries(st.sampled_from(["c0", "c1", "c2", "c3"]), labels, max_size=4),
    shown=st.lists(observations(), max_size=8),
)
def test_showing_a_plans_observations_at_once_is_showing_them_one_by_one(
    pending: dict[str, Label], shown: list[Observation]
) -> None:
    _shown_both_ways(pending, shown)


SHARED = [
    Label(confidentiality="internal", integrity="trusted"),
    Label(confidentiality="internal", integrity="untrusted"),
    Label(confidentiality="secret", integrity="trusted", readers=frozenset({"ann"})),
]
"""Label objects shared by many pending calls (as a plan's nodes of one tool share one)."""


@given(
    pending=st.dictionaries(st.sampled_from(MANY_IDS), st.sampled_from(SHARED), max_size=40),
    shown=st.lists(
        observations(MANY_IDS, st.sampled_from(SHARED), [None] * 9 + ["artifact://sha256/ab"]), max_size=80
    ),
)
def test_many_observations_of_a_few_labels_past_their_cap_of_call_ids_are_shown_as_one_by_one(
    pending: dict[str, Label], shown: list[Observation]
) -> None:
    _shown_both_ways(pending, shown)


def test_a_call_id_shown_twice_does_not_stop_the_next_ones_from_being_kept() -> None:
    label = Label(confidentiality="internal", integrity="trusted")
    tags = Provenance(fetched_at=1.0, trust="trusted", labels=label.tags())
    shown = [
        Observation(call_id=c, tool="t", tool_version="1", data=0, content_hash="h", provenance=tags)
        for c in ("c1", "c1", "c2", "c3")
    ]
    at_once = _shown_both_ways({}, shown)
    assert [source for source, _label in at_once.origins()] == ["c1", "c2", "c3"]
