"""The facts a tool returns beside its data (``ToolResult.total``, ``ToolResult.effects``) are taken
as they come, but an observation only keeps the ones its contract can hold: ``total`` is a count
(0 or more, one a store can hold) and an effect's ``kind`` is one of ``created``, ``updated``,
``deleted``, ``sent``. Whatever else a tool hands back, the observation still writes as JSON and
reads back the same, and the model's rendering keeps the data.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Effect, Observation, Runtime, ToolResult

_KINDS = {"created", "updated", "deleted", "sent"}


def _runtime(result: Any) -> Runtime:
    rt = Runtime()
    rt.add_tool(
        name="listing",
        input_schema={"type": "object", "properties": {}},
        fn=lambda: result,
        effect="write",
        idempotency="none",
    )
    return rt


def _call(result: Any) -> Observation:
    return _runtime(result).call({"name": "listing", "arguments": {}})


def _round_trips(obs: Observation) -> None:
    text = json.dumps(obs.to_dict(), allow_nan=False)
    again = Observation.from_dict(json.loads(text))
    assert again.total == obs.total
    assert [e.kind for e in again.effects] == [e.kind for e in obs.effects]


def test_a_total_too_long_to_print_is_dropped_and_the_observation_still_writes_as_json() -> None:
    obs = _call(ToolResult(data=[1, 2], total=10**5000, complete=False))
    assert obs.status == "ok"
    assert obs.total is None
    _round_trips(obs)


def test_a_negative_total_is_no_count_and_is_dropped() -> None:
    obs = _call(ToolResult(data=[1, 2], total=-5, complete=False))
    assert obs.total is None


@settings(max_examples=60, deadline=None)
@given(total=st.one_of(st.integers(), st.sampled_from([2**63 - 1, 2**63, 10**4299, -(10**5000)])))
def test_every_total_a_tool_returns_leaves_a_count_or_nothing(total: int) -> None:
    obs = _call(ToolResult(data=[1], total=total))
    assert obs.total is None or 0 <= obs.total < 2**63
    assert obs.total == (total if 0 <= total < 2**63 else None)
    _round_trips(obs)


def test_an_effect_of_an_unknown_kind_reads_as_updated() -> None:
    effects = (Effect(resource_id="row:1", kind="exploded"),)  # type: ignore[arg-type]
    obs = _call(ToolResult(data={"id": 1}, effects=effects))
    assert [(e.resource_id, e.kind) for e in obs.effects] == [("row:1", "updated")]
    _round_trips(obs)


def test_an_effect_mapping_with_a_huge_kind_leaves_the_data_in_the_models_rendering() -> None:
    effects = ({"resource_id": "row:7", "kind": "k" * 2_000_000},)
    rt = _runtime(ToolResult(data={"id": 7}, effects=effects))  # type: ignore[arg-type]
    s = rt.session(run_id="w96-effect-kind", provider="openai_chat")
    s.user("write the row")
    call = {"id": "c1", "type": "function", "function": {"name": "listing", "arguments": "{}"}}
    turn = s.handle({"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]})
    (obs,) = turn.observations
    assert {e.kind for e in obs.effects} <= _KINDS
    shown = json.loads(turn.messages[0]["content"])
    assert shown["data"] == {"id": 7}
    assert shown["effects"] == "updated row:7"
