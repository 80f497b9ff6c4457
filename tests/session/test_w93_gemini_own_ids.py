"""A Gemini model's own call id is echoed in its ``functionResponse`` whatever it looks like, and
only the ids the run gave to calls without one are left out (those are answered by order).

The id of a ``functionResponse`` was left out whenever it ended as the runtime's minted ids do
(``<run>:n<k>``, ``<run>:parse``), so a model that wrote such an id got its answer without it; and
an id the run gave that does not end so (``<run>:<index>``, a message over the call bound) was sent
to the model as if it had written it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.types import Observation
from tests.session.w47_world import sends, world

RUN = "g-own"


def _runtime(sent: list[str]) -> Runtime:
    rt = Runtime("memory://")

    def set_counter(name: str, value: int) -> dict[str, Any]:
        sent.append(name)
        return {"name": name, "value": value}

    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "value": {"type": "integer"}},
        "required": ["name", "value"],
    }
    rt.add_tool(name="set_counter", input_schema=schema, fn=set_counter, effect="read", description="Set.")
    return rt


def _message(calls: list[tuple[str | None, int]], reason: str = "STOP") -> dict[str, Any]:
    parts = []
    for ident, value in calls:
        call: dict[str, Any] = {"name": "set_counter", "args": {"name": f"k{value}", "value": value}}
        if ident is not None:
            call["id"] = ident
        parts.append({"functionCall": call})
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reason}]}


def _answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (content,) = messages
    assert content["role"] == "user"
    return [p["functionResponse"] for p in content["parts"]]


def _check(calls: list[tuple[str | None, int]], observations: tuple[Observation, ...], messages: Any) -> None:
    answers = _answers(messages)
    assert len(answers) == len(calls) == len(observations)
    for (ident, value), answer, obs in zip(calls, answers, observations, strict=True):
        assert answer.get("id") == ident, (ident, answer)  # the model's own id, or none: by order
        assert obs.data == {"name": f"k{value}", "value": value}
        if ident is not None:
            assert obs.call_id == ident
    assert len({o.call_id for o in observations}) == len(observations)  # no two calls share an id


_LOOKALIKES = [f"{RUN}:n1", f"{RUN}:n2", f"{RUN}:parse", f"{RUN}:0", f"{RUN}:n0", "other:n1", "x:parse"]


@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("ident", _LOOKALIKES)
def test_an_own_id_of_the_minted_form_is_echoed_beside_a_call_without_one(ident: str, together: bool) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id=RUN, provider="gemini")
    s.user("set them")
    calls: list[tuple[str | None, int]] = [(None, 0), (ident, 1), (None, 2)]
    message = _message(calls)
    turn = asyncio.run(s.ahandle(message)) if together else s.handle(message)
    _check(calls, turn.observations, turn.messages)
    assert sorted(sent) == ["k0", "k1", "k2"]
    rt.close()


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    calls=st.lists(
        st.one_of(
            st.none(),
            st.sampled_from(_LOOKALIKES),
            st.builds(lambda k: f"{RUN}:n{k}", st.integers(0, 12)),
            st.text(min_size=1, max_size=8),
        ),
        min_size=1,
        max_size=8,
        unique_by=lambda i: i if i is not None else object(),
    )
)
def test_every_own_id_is_echoed_and_every_call_without_one_is_answered_by_order(
    calls: list[str | None],
) -> None:
    sent: list[str] = []
    rt = _runtime(sent)
    s = rt.session(run_id=RUN, provider="gemini")
    s.user("set them")
    numbered = [(ident, i) for i, ident in enumerate(calls)]
    turn = s.handle(_message(numbered))
    _check(numbered, turn.observations, turn.messages)
    rt.close()


def test_the_ids_given_to_the_calls_of_a_message_over_the_bound_are_not_sent_as_the_models() -> None:
    rt = _runtime([])
    s = rt.session(run_id=RUN, provider="gemini")
    s.max_calls = 2
    s.user("set them")
    calls: list[tuple[str | None, int]] = [(None, 0), ("mine", 1), (None, 2)]
    turn = s.handle(_message(calls))
    assert [o.error.category for o in turn.observations if o.error is not None] == ["budget_exceeded"] * 3
    assert [a.get("id") for a in _answers(turn.messages)] == [None, "mine", None]


def test_a_cut_off_message_answers_each_own_id_and_leaves_out_none_of_them() -> None:
    rt = _runtime([])
    s = rt.session(run_id=RUN, provider="gemini")
    s.user("set them")
    turn = s.handle(_message([(f"{RUN}:n1", 0), (f"{RUN}:parse", 1)], reason="MAX_TOKENS"))
    assert all(o.status == "error" for o in turn.observations)
    ids = [a.get("id") for a in _answers(turn.messages)]
    assert ids == [f"{RUN}:n1", f"{RUN}:parse"]


def test_a_message_proposed_again_maps_to_the_same_nodes_and_is_answered_alike(tmp_path: Path) -> None:
    """Node identity does not read call ids: the same message again in the turn (one call without
    an id, one with an own id of the minted form) is replayed, nothing sent twice, and answered
    under the same ids the first time was."""
    rt = world(f"sqlite:///{tmp_path / 'rt.db'}", tmp_path / "outbox.db")
    s = rt.session(run_id="conv", provider="gemini")
    s.user("set them")
    parts = [
        {"functionCall": {"name": "set_counter", "args": {"name": "a", "value": 1}}},
        {"functionCall": {"id": "conv:n1", "name": "set_counter", "args": {"name": "b", "value": 2}}},
    ]
    message = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]}
    first, again = s.handle(message), s.handle(message)
    rt.close()
    assert [a.get("id") for a in _answers(first.messages)] == [None, "conv:n1"]
    assert [a.get("id") for a in _answers(again.messages)] == [None, "conv:n1"]
    assert [o.diagnostics.get("replayed") for o in again.observations] == [True, True]
    assert [o.data for o in again.observations] == [o.data for o in first.observations]
    assert sorted(sends(tmp_path / "outbox.db")) == [("counter:a", "1"), ("counter:b", "2")]
