"""A durable write (``Runtime.call`` of a new write on a SQLite file) runs few Python calls of the
pipeline, the trace and the executor on its thread.

Outside the stores' statements a durable call's time is mostly the interpreter entering and leaving
functions, so their number is held here (load-independent, unlike a timing). Counted: the frames of
``actionspace/pipeline/``, ``actionspace/trace/`` and ``actionspace/execution/`` (the ledger's and
the writer's own calls are the stores', counted elsewhere). Before: 49 a call (six payloads each
handed to ``texted_as`` and then to ``encode_data`` for the text made beside it, three
``_text`` calls for the tool's version, three kept texts looked up through ``PayloadTexts.text``,
``with in_flight`` through ``enter``/``leave``, ``Recorder.flush`` and its ``_labelled``,
``inspect.isawaitable`` of the tool's ``int``); 28 once those are written out or made once per tool
spec (``_write_parts.tool_heads``); 23 once ``Messages.calls`` counts the call in flight without
``InFlight.enter``/``leave``, the frame finds the run open without ``Engine.run`` and
``RunRegistry.known`` and the tool's kept texts without ``tool_heads``, and the trace store gets a
text made beside every payload (the shared ones' made once, ``_write_parts.shared_texted``); 18 once
the write's admission (``_write_admit.admitted``) reads the tool's entry once per ``EPOCH`` without
``FastPath.entry``, its kept flow verdict without ``verdict_of``, typed arguments' text without
``_digested`` and the run's revision without ``RunRegistry.refresh`` (called only when another
process saved a newer one), and the key is hashed without ``_key``'s call. What
is stored and read back is unchanged (tests/pipeline/test_w19_write_frame.py,
test_w20_write_frames.py, test_w22_durable_write_python.py, tests/trace/).
"""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import sqlite_writer

AREA = ("/actionspace/pipeline/", "/actionspace/trace/", "/actionspace/execution/")
BUDGET = 21
"""Python calls in :data:`AREA` per durable call on its thread: 20 now (the run's revision read
through ``RunRegistry.refresh``, a frame of ``pipeline/``, where the store's ``rev`` was, of
``ledger/``; the committed observation's labels' text kept per tuple, no two list comprehensions);
18 before the frame made the committed observation's ledger text, 21 with it
(``_write_parts._observation_text`` and its two list comprehensions); 23, 28 and 49 before (the
module docstring); room for one."""


def _put(key: str, value: int) -> int:
    return 3


def _counted(path: Path, n: int) -> tuple[Counter[str], list[Any]]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
    run = rt.new_run()
    seen: Counter[str] = Counter()
    me = threading.get_ident()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and threading.get_ident() == me:
            name = frame.f_code.co_filename
            if any(part in name for part in AREA):
                seen[f"{Path(name).name}:{frame.f_code.co_qualname}"] += 1

    out = []
    with rt:
        for i in range(20):  # the tool's entry made, its shared payloads' texts kept
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        gc.collect()
        sys.setprofile(profile)
        try:
            for i in range(n):
                call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
                out.append(rt.call(call, run_id=run, node_id=f"n{i}"))
        finally:
            sys.setprofile(None)
        events = rt.trace.events(run)
    assert [e.seq for e in events] == list(range(len(events)))
    assert sum(e.kind == "dispatched" for e in events) == 20 + n
    return seen, out


def test_a_durable_write_makes_few_python_calls_outside_the_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the flusher's thread aside: rows wait
    small, first = _counted(tmp_path / "a.db", 10)
    large, second = _counted(tmp_path / "b.db", 60)
    assert [(o.status, o.data) for o in first + second] == [("ok", 3)] * 70
    per_call = (sum(large.values()) - sum(small.values())) / 50
    assert per_call <= BUDGET, (per_call, (large - small).most_common())
