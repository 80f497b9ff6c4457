"""A plain new write runs in a frame of its own from sync code (pipeline/_write.py) and awaited
(pipeline/_awrite.py), and ends exactly as the general path ends it.

Over generated write tools (sync, blocking, or async — answering at once or after a wait —, a write
or an external call, deduping by key or not, taking the key or not, labels a built-in policy
allows, refuses or asks about) and generated calls (mostly awaited, node and call ids given or
not, identical calls again, arguments in and out of the schema, tools that commit, return an
``int``, fail, fail retryably or lose their answer), on a SQLite file and in memory: the same
observations, trace events as read back, whole ledger entries and flow state with the frames as
without them. Then which awaited calls take the frame, what an awaited write costs in Python
calls, and a write cut by ``close()`` while its tool waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import re
import sqlite3
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Observation, Runtime, ToolCall
from actionspace.catalog import RetryPolicy
from actionspace.errors import ToolError
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import Texted, encode_data
from tests.pipeline.test_fast_effects import POLICIES
from tests.pipeline.test_w19_write_frame import SCHEMA, _play, proposals

PACKAGE_DIR = "/actionspace/"
ACALL_BUDGET = 66
"""Python-level calls into ``actionspace`` per ``rt.acall`` of a new write of a sync tool on the
memory stores: 171 through the general path (the message's coroutine, the stages, the engine's
execution, the ledger driver's async generator), 64 in the frame of pipeline/_awrite.py; room
for two."""


_ROWS = "SELECT seq, kind, call_id, data FROM trace_events WHERE kind IN (?, ?, ?, ?) ORDER BY seq"


@dataclass(frozen=True)
class Tool:
    name: str
    effect: str
    native: bool
    kind: str  # "sync", "blocking", "async" (answers at once) or "waits" (async, awaits first)
    sink: bool
    confidentiality: str
    integrity: str


tools = st.builds(
    Tool,
    name=st.sampled_from(["w0", "w1", "w2"]),
    effect=st.sampled_from(["write", "write", "external"]),
    native=st.booleans(),
    kind=st.sampled_from(["sync", "blocking", "async", "waits"]),
    sink=st.booleans(),
    confidentiality=st.sampled_from(["public", "public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "trusted", "untrusted"]),
)


def _runtime(url: str, shapes: list[Tool], policy: str, *, frame: bool) -> Runtime:
    rt = Runtime(url, recover_on_start=False, flow_policy=POLICIES[policy])
    sends: dict[str, int] = {}

    def answer(a: int, note: str, mode: str, key: str) -> Any:
        sends[key] = sends.get(key, 0) + 1
        if mode == "permanent":
            raise ToolError("permanent", f"no {a}")
        if mode == "transient":
            raise ToolError("transient", f"busy {a}")
        if mode == "lost" and sends[key] == 1:
            raise ConnectionError("reset while sending")
        if mode == "int":
            return a
        return {"a": a, "note": note, "key": key, "sends": sends[key]}

    for shape in shapes:
        act, bare = _tool_fns(answer, shape.kind)
        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=act if shape.native else bare,
            effect=shape.effect,
            idempotency="native" if shape.native else "none",
            blocking=shape.kind == "blocking",
            retry=RetryPolicy(max_attempts=2, deadline_s=30.0, initial_backoff_s=0.0),
            labels={
                "confidentiality": shape.confidentiality,
                "integrity": shape.integrity,
                "sink": shape.sink,
            },
        )
    rt.engine.messages.writes = frame
    return rt


def _tool_fns(answer: Any, kind: str) -> tuple[Any, Any]:
    """The tool's function taking the key and the one that does not, of ``kind``."""
    if kind in ("async", "waits"):
        waits = kind == "waits"

        async def act(a: int, note: str = "", mode: str = "ok", idempotency_key: str = "") -> Any:
            if waits:
                await asyncio.sleep(0)
            return answer(a, note, mode, idempotency_key)

        async def bare(a: int, note: str = "", mode: str = "ok") -> Any:
            if waits:
                await asyncio.sleep(0)
            return answer(a, note, mode, "")

        return act, bare

    def act_sync(a: int, note: str = "", mode: str = "ok", idempotency_key: str = "") -> Any:
        return answer(a, note, mode, idempotency_key)

    def bare_sync(a: int, note: str = "", mode: str = "ok") -> Any:
        return answer(a, note, mode, "")

    return act_sync, bare_sync


@st.composite
def awaited(draw: st.DrawFn) -> tuple[ToolCall, str | None, bool]:
    call, node, _ = draw(proposals())
    return call, node, draw(st.integers(0, 4)) > 0  # mostly awaited


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    shapes=st.lists(tools, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(awaited(), min_size=2, max_size=8),
    policy=st.sampled_from(list(POLICIES)),
    user=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
    store=st.sampled_from(["memory", "memory", "sqlite"]),
)
def test_awaited_and_sync_writes_in_their_frames_end_as_the_general_path_ends_them(
    tmp_path: Path,
    shapes: list[Tool],
    calls: list[tuple[ToolCall, str | None, bool]],
    policy: str,
    user: list[str],
    store: str,
) -> None:
    played, rows = [], []
    for frame in (True, False):
        url = "memory://"
        if store == "sqlite":
            url = f"sqlite:///{tmp_path / f'l{len(list(tmp_path.iterdir()))}.db'}"
        with _runtime(url, shapes, policy, frame=frame) as rt:
            played.append(_play(rt, calls, user))
        if store == "sqlite":  # the texts of the kinds the frames make, as stored, byte for byte
            with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
                kinds = ("parsed", "ledger", "dispatched", "observation")
                found = db.execute(_ROWS, kinds).fetchall()
                rows.append([(q, k, c, re.sub("apr_[0-9a-f]+", "apr_*", d)) for q, k, c, d in found])
    assert played[0] == played[1]
    assert rows == [] or rows[0] == rows[1]


NAMES = st.text(st.characters(codec="utf-8"), max_size=6) | st.sampled_from(
    ['q"', "a\\b", "\x00", "é", "x" * 600]
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call_id=st.none() | NAMES, node=st.none() | NAMES, version=st.sampled_from(["1", "2.0", 'v"3']))
def test_the_payload_texts_made_beside_a_writes_events_are_what_the_store_would_write(
    tmp_path: Path, call_id: str | None, node: str | None, version: str
) -> None:
    """Every payload the frames hand a SQLite trace store with its text carries exactly the text
    ``encode_data`` writes for it, whatever the call id, node id or tool version holds; and the
    stored events read back as on the general path (the property above)."""
    made: list[tuple[str, str]] = []
    real = SqliteTraceStore.append_records

    def checked(store: SqliteTraceStore, run_id: str, records: Any) -> None:
        for record in records:  # a payload with its text made beside it, against the store's encoding
            if type(record[4]) is Texted:
                made.append((record[4].text, encode_data(dict(record[4]))))
        real(store, run_id, records)

    url = f"sqlite:///{tmp_path / f'p{len(list(tmp_path.iterdir()))}.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SqliteTraceStore, "append_records", checked)
        with Runtime(url, recover_on_start=False) as rt:

            def put(a: int) -> int:
                return a

            rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", version=version)
            run = rt.new_run()
            try:
                node_ok = node is None or (node.isascii() and "\x00" not in node)
                rt.call(ToolCall(name="put", arguments={"a": 0}), run_id=run)  # the entry made
                obs = rt.call(ToolCall(name="put", arguments={"a": 1}, id=call_id), run_id=run, node_id=node)
            except ValueError:
                assert not node_ok  # a node id no store can write: refused at the caller
                return
            assert obs.status == "ok" and obs.data == 1
    # the two moves, the observation and the commit, and parsed and dispatched when their texts are ASCII
    assert len(made) >= 4 + (call_id is None or call_id.isascii()) + (node is None or node.isascii())
    assert all(text == expected for text, expected in made), made


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_an_awaited_new_write_takes_the_frame_over_stores_in_memory(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property above compares outcomes; this shows which awaited calls the frame takes:
    over stores in memory a new write once its tool's entry is made (not the first call of the
    tool in the run, nor one the schema refuses); over SQLite none (its steps go off the loop)."""
    _awrite = importlib.import_module("actionspace.pipeline._awrite")
    taken: list[bool] = []
    real = _awrite.admitted

    def spy(*args: Any) -> Any:
        got = real(*args)
        taken.append(got is not None)
        return got

    monkeypatch.setattr(_awrite, "admitted", spy)
    url = f"sqlite:///{tmp_path / 'l.db'}" if store == "sqlite" else "memory://"
    shape = Tool("w0", "write", False, "async", False, "public", "trusted")
    with _runtime(url, [shape], "default", frame=True) as rt:
        run = rt.new_run()

        async def play() -> list[Observation]:
            out = [await rt.acall(ToolCall(name="w0", arguments={"a": i}), run_id=run) for i in range(4)]
            out.append(await rt.acall(ToolCall(name="w0", arguments={"a": 1}), run_id=run))  # a replay
            out.append(await rt.acall(ToolCall(name="w0", arguments={"a": "x"}), run_id=run))
            return out

        out = asyncio.run(play())
        assert [o.status for o in out[:4]] == ["ok"] * 4
        assert out[4].diagnostics.get("replayed") is True and out[4].data == out[1].data
        assert out[5].error is not None and out[5].error.category == "invalid_arguments"
        entries = [e for e in rt.engine.ledger.list() if e.run_id == run]
        assert sorted(e.state for e in entries) == ["committed"] * 4
    if store == "sqlite":
        assert taken == []
    else:
        assert taken == [False, True, True, True, True, False]


def _acalls_of(n: int, first: int) -> tuple[Counter[str], list[Any]]:
    rt = Runtime("memory://", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    run = rt.new_run()
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and PACKAGE_DIR in code.co_filename:
            calls[code.co_qualname] += 1

    async def play() -> list[Observation]:
        for i in range(40):  # the name resolved, the entry built
            call = ToolCall(name="put", arguments={"key": f"w{i}", "value": i})
            await rt.acall(call, run_id=run, node_id=f"w{i}")
        out = []
        gc.collect()
        sys.setprofile(profile)
        try:
            for i in range(first, first + n):
                call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
                out.append(await rt.acall(call, run_id=run, node_id=f"n{i}"))
        finally:
            sys.setprofile(None)
        return out

    with rt:
        out = asyncio.run(play())
    return calls, out


def test_an_awaited_new_write_makes_a_short_chain_of_python_calls() -> None:
    small, first = _acalls_of(20, 0)
    large, second = _acalls_of(120, 1000)
    assert [(o.status, o.data) for o in first + second] == [("ok", 3)] * 140
    per_call = (sum(large.values()) - sum(small.values())) / 100
    assert per_call <= ACALL_BUDGET, (per_call, (large - small).most_common())


@pytest.mark.parametrize("frame", [True, False])
def test_an_awaited_write_cut_by_close_while_its_tool_waits_ends_unknown_commit(frame: bool) -> None:
    """Another thread closes the runtime while the frame's tool waits: the call ends promptly,
    ``unknown_commit`` naming its key, its entry noted ``unknown`` by the close, its observation
    stored, and the caller's task left with no cancel pending — as on the general path."""
    rt = Runtime("memory://", recover_on_start=False)
    started = threading.Event()

    async def aput(x: int) -> int:
        if x == 1:
            started.set()
            await asyncio.sleep(5.0)
        return x

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    rt.add_tool(name="aput", input_schema=schema, fn=aput, effect="write")
    rt.engine.messages.writes = frame
    run = rt.new_run()
    out: list[Any] = []

    async def play() -> None:
        first = await rt.acall(ToolCall(name="aput", arguments={"x": 0}), run_id=run)  # the entry made
        cut = await rt.acall(ToolCall(name="aput", arguments={"x": 1}), run_id=run)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        out.extend([first, cut, time.monotonic()])

    thread = threading.Thread(target=lambda: asyncio.run(play()), daemon=True)
    thread.start()
    assert started.wait(10.0)
    time.sleep(0.1)
    closed_at = time.monotonic()
    rt.close()
    thread.join(10.0)
    assert not thread.is_alive()
    first, cut, ended_at = out
    assert ended_at - closed_at < 1.5
    assert first.status == "ok" and first.data == 0
    assert cut.error is not None and cut.error.category == "unknown_commit" and "closed" in cut.error.message
    key = cut.error.details["idempotency_key"]
    entry = rt.engine.ledger.get(key)
    assert entry is not None and entry.state == "unknown"
    categories = [e.data.get("category") for e in rt.trace.events(run) if e.kind == "observation"]
    assert categories == [None, "unknown_commit"]
