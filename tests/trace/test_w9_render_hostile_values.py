"""An in-process trace (the memory store keeps the values it is given) can hold values no store
writes as they are: objects whose ``str`` raises, cycles, integers too long to print, objects
whose truth raises. Rendering a run of them is one line per event, never an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from actionspace.trace.events import TraceEvent
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.render import event_outcome, events_json, summarize_event, timeline_rows


class Boom:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    __str__ = __repr__

    def __bool__(self) -> bool:
        raise RuntimeError("bool")


def _loop() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


_VALUES: dict[str, Any] = {
    "str-raises": Boom(),
    "cycle": _loop(),
    "huge-int": 10**5000,
    "set": {1, 2},
}


@pytest.mark.parametrize("value", list(_VALUES.values()), ids=list(_VALUES))
@pytest.mark.parametrize("kind", ["dispatched", "observation", "validated", "custom"])
def test_a_hostile_value_in_any_field_renders_as_one_line(kind: str, value: Any) -> None:
    store = MemoryTraceStore()
    fields = ("tool", "attempt", "status", "category", "error", "verdict", "reason", "other")
    store.append_many(
        [
            TraceEvent(run_id="r", seq=n, kind=kind, ts=1.0, call_id="c", data={f: value})
            for n, f in enumerate(fields)
        ]
    )
    events = store.events("r")
    rows = timeline_rows(events)
    assert len(rows) == len(fields)
    for row in rows:
        assert "\n" not in row.summary and len(row.summary) <= 160
    for event in events:
        assert event_outcome(event) in ("ok", "warn", "error", "info")
        assert summarize_event(event)
    printed = json.loads(events_json(events))
    assert [e["seq"] for e in printed] == list(range(len(fields)))
