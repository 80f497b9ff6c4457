"""Outside a session, ``rt.call_all`` / ``rt.acall_all`` give a call without an id an id of the form
the runtime mints (``<run>:n<k>``); the model may have written such ids on the other calls of the
same message. The minted id must be none of them: each id is answered once, with its own call's
result, and the id-less call is answered too (providers pair results with calls by id)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.types import Observation
from tests.session.w47_world import crowded_message, sends, taken_ids, world

RUN = "conv-all"
TAKEN = taken_ids(RUN)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("output", ["openai_first", "openai_last", "mistral"])
def test_call_all_gives_an_id_less_call_an_id_no_other_call_of_the_message_holds(
    tmp_path: Path, store: str, together: bool, output: str
) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'rt.db'}"
    outbox = tmp_path / "outbox.db"
    rt: Runtime = world(url, outbox)
    try:
        message = crowded_message(RUN, output)
        observations = (
            asyncio.run(rt.acall_all(message, run_id=RUN)) if together else rt.call_all(message, run_id=RUN)
        )
        ids = [o.call_id for o in observations]
        assert len(ids) == len(TAKEN) + 1 and len(set(ids)) == len(ids), ids
        assert all(o.status == "ok" for o in observations), [o.error for o in observations]
        for obs in observations:  # each id answers its own call, never another's
            assert isinstance(obs.data, dict)
            if obs.call_id in TAKEN:
                assert obs.data["name"] == f"k{TAKEN.index(obs.call_id)}"
            else:
                assert obs.data == {"name": "x", "value": 99}
        assert sorted(sends(outbox)) == sorted(
            [("counter:x", "99")] + [(f"counter:k{i}", str(i)) for i in range(len(TAKEN))]
        )
    finally:
        rt.close()


def _echo_runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def echo(v: int) -> int:
        """Give ``v`` back."""
        return v

    return rt


def _answers(observations: list[Observation]) -> dict[str, Any]:
    return {o.call_id: o.data for o in observations}


@settings(max_examples=60, deadline=None)
@given(
    given_ids=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=8, unique=True),
    bare=st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=4),
    together=st.booleans(),
)
def test_every_call_of_a_message_is_answered_once_under_its_own_id(
    given_ids: list[int], bare: list[int], together: bool
) -> None:
    rt = _echo_runtime()
    try:
        entries: list[dict[str, Any]] = [
            {
                "id": f"{RUN}:n{k}",
                "type": "function",
                "function": {"name": "echo", "arguments": json.dumps({"v": k})},
            }
            for k in given_ids
        ]
        for n, at in enumerate(bare):  # the id-less calls, each with a value no given id has
            entry = {"type": "function", "function": {"name": "echo", "arguments": json.dumps({"v": -1 - n})}}
            entries.insert(min(at, len(entries)), entry)
        message = {"role": "assistant", "content": None, "tool_calls": entries}
        observations = (
            asyncio.run(rt.acall_all(message, run_id=RUN)) if together else rt.call_all(message, run_id=RUN)
        )
        ids = [o.call_id for o in observations]
        assert len(ids) == len(entries) and len(set(ids)) == len(ids), ids
        answers = _answers(observations)
        for k in given_ids:
            assert answers[f"{RUN}:n{k}"] == k
        minted = [o for o in observations if o.call_id not in {f"{RUN}:n{k}" for k in given_ids}]
        assert sorted(o.data for o in minted) == sorted(-1 - n for n in range(len(bare)))
    finally:
        rt.close()
