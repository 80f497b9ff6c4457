"""Replay says which recorded events it did not read: a count per kind this version does not know
(a newer version's, or a custom stage's recorded with ``rt.record``), in text and JSON alike."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.trace.events import EVENT_KINDS, TraceEvent
from actionspace.trace.replay import render_text, replay_events

NOTE = "not replayed: kinds this version does not know"


def _build() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read")
    def look(q: str) -> str:
        return q

    return rt


def _run_with(extra: list[tuple[str, str | None]]) -> tuple[str, list[TraceEvent]]:
    rt = _build()
    run = rt.new_run("r")
    assert rt.call({"name": "look", "arguments": {"q": "x"}}, run_id=run).status == "ok"
    for kind, call_id in extra:
        rt.record(run, kind, {"note": "n"}, call_id=call_id)
    return run, rt.trace.events(run)


def test_replay_counts_each_kind_it_does_not_know_and_says_so() -> None:
    run, events = _run_with(
        [("guardrail_scored", "r:n1"), ("guardrail_scored", None), ("model_cost", None), ("verified", None)]
    )
    result = replay_events(run, events, _build())
    assert dict(result.unknown_kinds) == {"guardrail_scored": 2, "model_cost": 1}
    assert result.to_dict()["unknown_kinds"] == {"guardrail_scored": 2, "model_cost": 1}
    text = render_text(result)
    assert f"{NOTE}: guardrail_scored ×2, model_cost ×1" in text
    assert result.differences == [] and result.unreplayed == []


def test_a_run_of_known_kinds_reports_no_unknown_kind() -> None:
    run, events = _run_with([("verified", None)])
    result = replay_events(run, events, _build())
    assert dict(result.unknown_kinds) == {} and NOTE not in render_text(result)
    assert json.loads(json.dumps(result.to_dict()))["unknown_kinds"] == {}


def test_an_unknown_kind_is_shown_with_its_control_characters_escaped() -> None:
    run, events = _run_with([("evil\x1b[31m\nkind", None)])
    text = render_text(replay_events(run, events, _build()))
    assert "\x1b" not in text and "evil\\x1b[31m\\x0akind ×1" in text


@settings(max_examples=40, deadline=None)
@given(kinds=st.lists(st.text(min_size=1, max_size=12), max_size=12))
def test_every_event_of_an_unknown_kind_is_counted_once(kinds: list[str]) -> None:
    base = [TraceEvent(run_id="r", seq=0, kind="run_started", ts=1.0, data={})]
    events = base + [TraceEvent(run_id="r", seq=i + 1, kind=k, ts=1.0, data={}) for i, k in enumerate(kinds)]
    result = replay_events("r", events, _build())
    unknown = [k for k in kinds if k not in EVENT_KINDS]
    assert sum(n for _, n in result.unknown_kinds) == len(unknown)
    assert dict(result.unknown_kinds) == {k: unknown.count(k) for k in set(unknown)}
