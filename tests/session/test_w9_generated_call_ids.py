"""A model leaves the id off one call of a message and gives the others ids of the form the
runtime mints for an id-less call (``<run>:n<k>``). The runtime's id for the id-less call must not
be one the model gave: each id is answered once, with the result of its own call, and the id-less
call's result is answered too (providers pair results with calls by id)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from actionspace import Runtime
from tests.session.w47_world import answered_ids, crowded_message, sends, taken_ids, world

RUN = "conv-ids"
TAKEN = taken_ids(RUN)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("output", ["openai_first", "openai_last", "mistral"])
def test_the_id_of_an_id_less_call_is_none_the_model_gave_and_each_id_gets_its_own_result(
    tmp_path: Path, store: str, together: bool, output: str
) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'rt.db'}"
    outbox = tmp_path / "outbox.db"
    rt: Runtime = world(url, outbox)
    s = rt.session(run_id=RUN, provider="openai_chat")
    s.user("set them all")
    message = crowded_message(RUN, output)
    turn = asyncio.run(s.ahandle(message)) if together else s.handle(message)
    ids = [o.call_id for o in turn.observations]
    assert len(ids) == len(TAKEN) + 1 and len(set(ids)) == len(ids)
    assert all(o.status == "ok" for o in turn.observations), [o.error for o in turn.observations]
    for obs in turn.observations:  # each id answers its own call, never another's
        assert isinstance(obs.data, dict)
        if obs.call_id in TAKEN:
            assert obs.data["name"] == f"k{TAKEN.index(obs.call_id)}"
        else:
            assert obs.data == {"name": "x", "value": 99}
    assert answered_ids("openai_chat", turn.messages) == ids
    assert sorted(sends(outbox)) == sorted(
        [("counter:x", "99")] + [(f"counter:k{i}", str(i)) for i in range(len(TAKEN))]
    )
    rt.close()
