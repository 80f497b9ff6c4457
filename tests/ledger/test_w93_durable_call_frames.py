"""A durable write call on SQLite runs three Python frames fewer around the ledger, and makes its
``Begun`` without the frozen class's ``__init__``, with the same answers.

- ``ledger.recover.running_here`` counts the keys it holds in a plain ``dict``: a ``Counter``'s
  missing key ran ``Counter.__missing__``, a Python frame, once a durable call.
- ``SqliteLedgerStore.begin`` answers a new entry's ``Begun`` with its slots set by their own
  setters (``entries.begun_new``), not through the frozen class's ``__init__``.
- ``SqliteLedgerStore.transition`` answers the entry it was handed when the row it moved holds the
  entry's own identity (no ``with_identity`` frame), and writes an ``Encoded`` observation's text
  without a ``to_json`` frame; an entry naming another identity is still answered with the stored
  one.
- What the count held for is unchanged: over generated sequences of holds and releases a key is
  in flight here exactly while some hold of it is not released, each release counts once, and no
  key is left held by nobody.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.ledger import recover
from actionspace.ledger.entries import Begun, Encoded, LedgerEntry
from actionspace.ledger.sqlite import SqliteLedgerStore

CALLS = 40


def _runtime(path: Path) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    return rt, rt.new_run()


def test_a_durable_call_runs_no_counter_identity_or_json_frame(tmp_path: Path) -> None:
    rt, run = _runtime(tmp_path / "a.db")
    try:
        for i in range(20):  # warm: the tool's entry, texts and statements made
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        frames: collections.Counter[str] = collections.Counter()

        def spy(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call":
                name = frame.f_code.co_name
                if name == "__init__" and type(frame.f_locals.get("self")) is Begun:
                    name = "Begun.__init__"
                frames[name] += 1

        observations = []
        sys.setprofile(spy)
        try:
            for i in range(CALLS):
                call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
                observations.append(rt.call(call, run_id=run, node_id=f"n{i}"))
        finally:
            sys.setprofile(None)
        assert [(o.status, o.data) for o in observations] == [("ok", 3)] * CALLS
        # the old code: (40, 40, 80, 40): a Counter's __missing__, with_identity, to_json for the
        # observation as well as for the intent's arguments, and the frozen Begun's __init__
        counted = ("__missing__", "with_identity", "to_json", "Begun.__init__")
        assert tuple(frames[name] for name in counted) == (0, 0, CALLS, 0)
        for i in range(CALLS):
            stored = rt.ledger.get_node(run, f"n{i}")
            assert stored is not None and stored.state == "committed"
            assert stored.observation is not None and stored.observation["data"] == 3
    finally:
        rt.close()


def test_a_transition_answers_its_own_entry_and_another_identity_the_stored_one(tmp_path: Path) -> None:
    store = SqliteLedgerStore(tmp_path / "l.db")
    try:
        begun = LedgerEntry(key="k1", run_id="r", node_id="n1", tool="t", args_digest="d", arguments={"a": 1})
        store.begin(begun)
        observation = Encoded({"data": 1})
        observation.text = '{"data": 1}'
        moved = begun.evolve(state="committed", observation=observation)
        assert store.transition("k1", ("accepted",), moved) is moved  # its own identity: itself
        again = store.get("k1")
        assert again is not None and again.observation == {"data": 1} and again.state == "committed"
        other = LedgerEntry(key="k2", run_id="r", node_id="n2", tool="t", args_digest="d", arguments={"a": 2})
        store.begin(other)
        renamed = other.evolve(node_id="elsewhere", tool="u", state="dispatched")
        answered = store.transition("k2", ("accepted",), renamed)
        assert answered is not None and answered is not renamed
        assert (answered.run_id, answered.node_id, answered.tool, answered.args_digest) == (
            "r",
            "n2",
            "t",
            "d",
        )
        assert answered.state == "dispatched"
        assert store.transition("k2", ("accepted",), renamed) is None  # not in the expected state
    finally:
        store.close()


def test_a_begun_made_by_its_setters_is_the_dataclass_s_own() -> None:
    from actionspace.ledger.entries import begun_new

    entry = LedgerEntry(key="k", run_id="r", node_id="n", tool="t", args_digest="d", arguments={})
    made = begun_new(entry)
    assert made == Begun(entry, True, None) and repr(made) == repr(Begun(entry, True, None))
    assert (made.entry, made.created, made.pending) == (entry, True, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.created = False  # type: ignore[misc]


_KEYS = st.sampled_from(["as1_a", "as1_b", "as1_c"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _KEYS, st.integers(0, 5)), max_size=40))
def test_a_key_is_in_flight_here_exactly_while_a_hold_of_it_is_not_released(
    steps: list[tuple[bool, str, int]],
) -> None:
    holds: list[tuple[str, Any]] = []
    model: collections.Counter[str] = collections.Counter()
    released: set[int] = set()
    try:
        for hold, key, pick in steps:
            if hold or not holds:
                holds.append((key, recover.running_here(key)))
                model[key] += 1
            else:
                at = pick % len(holds)
                held_key, release = holds[at]
                release()
                release()  # a second call counts nothing
                if at not in released:
                    released.add(at)
                    model[held_key] -= 1
            for each in ("as1_a", "as1_b", "as1_c"):
                assert recover.in_flight_here(each) is (model[each] > 0)
            assert all(count > 0 for count in recover._HERE.values())
    finally:
        for at, (_, release) in enumerate(holds):
            if at not in released:
                release()
    assert not any(key in recover._HERE for key in ("as1_a", "as1_b", "as1_c"))
