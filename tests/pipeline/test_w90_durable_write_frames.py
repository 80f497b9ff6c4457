"""What a durable write (``Runtime.call`` of a new write on a SQLite file) runs of the run's revision
read, the committed observation's labels and the call's answer, and that the run's refresh stays
what it was.

Counted per call on the calling thread with ``sys.setprofile`` (load-independent, unlike a timing):

- the revision read is ``RunRegistry.refresh`` and the store's kept read, through the store's
  ``rev_row`` (a ``partial``, no frame): no ``SqliteRunStateStore.rev`` frame in its usual course
  (before: one a call, the write frame's admission calling it and ``refresh`` only on a newer
  snapshot);
- the committed observation's ledger text takes its labels' text kept per tuple of labels
  (``_write_parts._LABELS``): no list comprehension a call (before: two);
- ``Runtime.call`` answers its one observation as it is while the runtime is open: no
  ``_closing.answered`` or ``ended_by_close`` frame (before: one each).

And the refresh, now one function for the write frame and the rest: a snapshot another connection
stored (a newer label) is merged before the next call is authorized; an unreadable revision raises
``RunStateError`` as ``SqliteRunStateStore.rev`` does; the direct frame and the write frame take an
entry checked once per ``EPOCH`` through ``FastPath.stamped``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace._epoch import bump
from actionspace.errors import RunStateError
from actionspace.ledger import sqlite_writer

SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}


def _put(key: str, value: int) -> int:
    return 3


def _runtime(path: Path) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=_put, effect="write", blocking=False)
    return rt, rt.new_run()


def _frames(path: Path, n: int) -> tuple[Counter[str], list[Any]]:
    """Python frames by ``file:qualname`` over ``n`` durable calls on the calling thread."""
    rt, run = _runtime(path)
    seen: Counter[str] = Counter()
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and threading.get_ident() == me:
            seen[f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_qualname}"] += 1

    out = []
    with rt:
        for i in range(20):  # the tool's entry made, its kept texts made
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        gc.collect()
        sys.setprofile(profile)
        try:
            for i in range(n):
                call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
                out.append(rt.call(call, run_id=run, node_id=f"n{i}"))
        finally:
            sys.setprofile(None)
    return seen, out


def test_a_durable_write_reads_the_revision_labels_and_answer_without_their_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher's thread aside
    n = 40
    seen, out = _frames(tmp_path / "a.db", n)
    assert [(o.status, o.data) for o in out] == [("ok", 3)] * n
    left = (
        seen["run_state.py:SqliteRunStateStore.rev"],
        seen["_write_parts.py:_observation_text.<locals>.<listcomp>"],
        seen["_write_parts.py:_labels_text"],  # made once per tuple of labels, before these calls
        seen["_closing.py:answered"] + seen["_closing.py:ended_by_close"],
    )
    assert left == (0, 0, 0, 0)
    assert seen["runs.py:RunRegistry.refresh"] == n  # the revision is still read on every call
    assert seen["sqlite_writer.py:GroupCommit.read_kept"] == n


def _label_raised_elsewhere(path: Path, run: str) -> None:
    """Another connection (as another process would) stores the run's snapshot one revision on,
    its label secret."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        (text,) = db.execute("SELECT state FROM run_state WHERE run_id = ?", (run,)).fetchone()
        state = json.loads(text)
        state["rev"] = state.get("rev", 0) + 1
        state["flow"]["context"]["confidentiality"] = "secret"
        db.execute("UPDATE run_state SET state = ? WHERE run_id = ?", (json.dumps(state), run))
    finally:
        db.close()


def test_a_snapshot_stored_by_another_connection_is_merged_before_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    rt, run = _runtime(path)
    with rt:
        first = rt.call(ToolCall(name="put", arguments={"key": "a", "value": 1}), run_id=run, node_id="a")
        assert (first.status, first.data) == ("ok", 3)
        rt.engine.runs.persist(rt.engine.runs.live[run])
        assert not rt.context_label(run).secret
        _label_raised_elsewhere(path, run)
        second = rt.call(ToolCall(name="put", arguments={"key": "b", "value": 2}), run_id=run, node_id="b")
        assert rt.context_label(run).secret  # merged by the write frame's refresh before the call
        assert (second.status, second.data) == ("ok", 3)


def test_an_unreadable_revision_raises_as_the_store_raises_it(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    rt, run = _runtime(path)
    with rt:
        rt.call(ToolCall(name="put", arguments={"key": "a", "value": 1}), run_id=run, node_id="a")
        rt.engine.runs.persist(rt.engine.runs.live[run])
        db = sqlite3.connect(path, isolation_level=None)
        (text,) = db.execute("SELECT state FROM run_state WHERE run_id = ?", (run,)).fetchone()
        damaged = re.sub(r'"rev":(\d+)', r'"rev":"\1"', text)  # a text where the revision's int was
        assert damaged != text
        db.execute("UPDATE run_state SET state = ? WHERE run_id = ?", (damaged, run))
        db.close()
        store = rt.engine.runs.run_states
        with pytest.raises(RunStateError):
            store.rev(run)  # type: ignore[attr-defined]
        with pytest.raises(RunStateError):
            rt.engine.runs.refresh(rt.engine.runs.live[run])


def test_the_frames_take_an_entry_through_fast_path_stamped(tmp_path: Path) -> None:
    """Each move of ``EPOCH`` sends the next write's and the next simple call's entry to
    ``FastPath.stamped`` once; a call at the same value takes the stamped entry as it is."""
    rt, run = _runtime(tmp_path / "a.db")

    async def add(a: int, b: int) -> int:
        return a + b

    mem = Runtime("memory://", recover_on_start=False)
    mem.tool(effect="none")(add)
    mem_run = mem.new_run()
    asked: list[str] = []
    for each in (rt, mem):
        fast = each.engine.fast
        real = fast.stamped

        def stamped(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            asked.append(args[1])
            return _real(*args, **kwargs)

        fast.stamped = stamped  # type: ignore[method-assign]
    raw = '{"id": "c%d", "type": "function", "function": {"name": "add", "arguments": '
    raw += '"{\\"a\\": 1, \\"b\\": %d}"}}'
    with rt, mem:
        for i in range(6):
            if i in (2, 4):
                bump()
            asked.append(f"call {i}")
            obs = rt.call(
                ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
            )
            assert (obs.status, obs.data) == ("ok", 3)
            quick = asyncio.run(mem.acall(raw % (i, i), run_id=mem_run))
            assert (quick.status, quick.data) == ("ok", 1 + i)
    # the write: its entry missing (call 0: the general path builds it), its stamp missing (call 1),
    # each bump; the simple call: from its second call (the first goes to the general path before
    # the entry is read), each bump; no other call asks it
    assert " ".join(asked) == "call 0 put call 1 put add call 2 put add call 3 call 4 put add call 5"
