"""What a durable call's trace costs the SQLite store, and that readers see the same events.

A call's nine records are encoded on the calling thread: the payloads every call of a tool shares
(``authorized``, ``validated``, ``flow_checked``) are looked up in the store's text cache, the
others (made per call) encoded at once without passing through it, and a payload of text keys and
short texts and scalars written by ``encode_data`` itself, without a walk first. The file's writer
inserts a call's nine rows with one statement. Counted here in Python calls on the calling thread
and in statements (load-independent); what is stored and read back must not change.
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actionspace.trace._payload_texts as payload_texts
import actionspace.trace._sqlite_held as sqlite_held
import actionspace.trace.sqlite as trace_sqlite
import actionspace.trace.store_encoding as store_encoding
from actionspace import Runtime, ToolCall
from actionspace._encoder import strict_dumps
from actionspace._unicode import json_for_utf8
from actionspace.ledger import sqlite_writer
from actionspace.trace.events import TraceEvent
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store_encoding import MAX_EVENT_CHARS, encode_data

BUDGET = 1
"""Python calls of the trace store's files a durable call runs on its thread: 1 now
(``append_records``, which takes a payload's text made beside it, ``store_encoding.Texted``, and
a kept text of a shared payload without a call); 10 before that (three kept texts looked up
through ``PayloadTexts.text``, six ``encode_data`` calls each answering the text the write's frame
made beside its payload); 13 before that (the nested ``parsed`` payload
walked, with its two generators); the code before that 24 (nine lookups of the text cache, a walk
of every payload encoded)."""
_FILES = frozenset(m.__file__ for m in (trace_sqlite, payload_texts, store_encoding, sqlite_held))


def _put(key: str, value: int) -> int:
    return 3


def _runtime(path: Path) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=_put, effect="write", blocking=False)
    return rt, rt.new_run()


def _call(rt: Runtime, run: str, i: int) -> None:
    obs = rt.call(ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}")
    assert (obs.status, obs.data) == ("ok", 3), obs


def test_a_durable_calls_trace_runs_few_python_calls_on_its_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)  # the rows wait for the read below
    rt, run = _runtime(tmp_path / "a.db")
    calls = 40
    try:
        for i in range(10):  # the run's label settles, the tool's shared payloads are kept
            _call(rt, run, i)
        seen: Counter[str] = Counter()
        me = threading.get_ident()

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            if event == "call" and frame.f_code.co_filename in _FILES and threading.get_ident() == me:
                seen[f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"] += 1

        sys.setprofile(profile)
        try:
            for i in range(10, 10 + calls):
                _call(rt, run, i)
        finally:
            sys.setprofile(None)
        per_call = sum(seen.values()) / calls
        assert per_call <= BUDGET, (per_call, seen.most_common())
        events = rt.trace.events(run)
    finally:
        rt.close()
    kinds = Counter(event.kind for event in events)
    assert kinds["dispatched"] == kinds["flow_checked"] == kinds["authorized"] == 10 + calls
    assert [e.seq for e in events] == list(range(len(events)))
    nodes = [e.data["node_id"] for e in events if e.kind == "dispatched"]
    assert nodes == [f"n{i}" for i in range(10 + calls)]


def _watched(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    statements: list[str] = []
    connect = sqlite3.connect

    def watching(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn: sqlite3.Connection = connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", watching)
    return statements


def _nine(call: int) -> list[tuple[int, str, float, str | None, dict[str, Any]]]:
    kinds = ["parsed", "authorized", "validated", "flow_checked", "ledger", "ledger", "dispatched"]
    kinds += ["observation", "ledger"]
    return [
        (i, kind, 10.0 + call + i / 100, f"r:n{call}", {"call": call, "i": i}) for i, kind in enumerate(kinds)
    ]


@pytest.mark.parametrize(("calls", "inserts"), [(1, 1), (3, 1), (4, 2), (9, 1)])
def test_a_calls_nine_rows_are_inserted_by_one_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: int, inserts: int
) -> None:
    monkeypatch.setattr(sqlite_writer, "LINGER_S", 600.0)
    statements = _watched(monkeypatch)
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        statements.clear()
        for call in range(calls):
            store.append_records("r", _nine(call))
        events = store.events("r")  # the held rows committed first, in one transaction
    finally:
        store.close()
    written = [s for s in statements if s.startswith("INSERT INTO trace_events")]
    # the code before: 4 + 4 + 1 rows, three statements for one call, six for three
    assert len(written) == inserts, [s[:60] for s in written]
    assert [(e.seq, e.data["call"], e.data["i"]) for e in events] == [
        (9 * c + i, c, i) for c in range(calls) for i in range(9)
    ]


def _reference(data: Any) -> str:
    """``encode_data`` as it was before the flat objects' loop: every object walked first."""
    plain = data if type(data) is dict else dict(data)
    try:
        if not store_encoding._text_keys(plain):
            raise TypeError("keys that are not text")
        text = strict_dumps(plain)
    except (ValueError, TypeError, RecursionError, OverflowError):
        text = strict_dumps(store_encoding._safe(dict(data), 0))
    if len(text) > MAX_EVENT_CHARS:
        text = strict_dumps(store_encoding._shrunk(data, text))
    return json_for_utf8(text) if not text.isascii() else text


class _Text(str):
    def __str__(self) -> str:
        return "other"


class _Number(int):
    pass


_keys = st.one_of(
    st.text(max_size=4),
    st.builds(_Text, st.text(max_size=2)),
    st.integers(-3, 3),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True),
    st.just(math.nan),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.just(2**13000),  # printed by the encoder, written as its size by the safe one
    st.floats(),
    st.text(st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))),
    st.builds(lambda n: "x" * n, st.sampled_from([511, 512, 513, 5_000])),
    st.builds(_Text, st.text(max_size=3)),
    st.builds(_Number, st.integers()),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.one_of(
        st.dictionaries(_keys, _scalars, max_size=6),
        st.dictionaries(st.text(max_size=3), _values, max_size=5),
        st.dictionaries(st.integers(0, 200), st.integers(), min_size=60, max_size=70),
        st.dictionaries(st.text(min_size=1, max_size=70), st.text(max_size=3), min_size=60, max_size=70),
    )
)
def test_a_payload_is_encoded_as_every_object_walked_first_encodes_it(data: dict[Any, Any]) -> None:
    assert encode_data(data) == _reference(data)


def test_a_flat_payload_past_the_size_bound_is_encoded_as_before() -> None:
    # a flat object of a text over the bound and a long integer: shrunk, the integer written as its size
    data = {"big": "x" * (MAX_EVENT_CHARS + 10), "n": 2**13000, "ok": "yes"}
    text = encode_data(data)
    assert text == _reference(data)
    assert len(text) < MAX_EVENT_CHARS and json.loads(text)["ok"] == "yes"


_shared: list[dict[str, Any]] = [
    {"verdict": "allowed", "principal": "p\u00e9"},
    {"verdict": "accepted", "tool": "put", "n": [1, {"a": None}]},
    {"decision": "allow", "x": "\ud800"},
]


@settings(max_examples=40, deadline=None)
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["ra", "rb"]),
            st.lists(
                st.tuples(
                    st.sampled_from(["authorized", "validated", "flow_checked", "ledger", "run_started"]),
                    st.integers(0, 2),
                    st.one_of(st.none(), st.dictionaries(st.text(max_size=3), _scalars, max_size=3)),
                    st.one_of(st.none(), st.sampled_from(["c1", "c\u00e92"])),
                ),
                min_size=1,
                max_size=30,
            ),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_held_calls_read_back_as_the_events_written_one_by_one_shared_payloads_included(
    tmp_path_factory: pytest.TempPathFactory, calls: list[tuple[str, list[tuple[str, int, Any, Any]]]]
) -> None:
    home = tmp_path_factory.mktemp("t")
    held, plain = SqliteTraceStore(home / "held.db"), SqliteTraceStore(home / "plain.db")
    try:
        following: dict[str, int] = {}
        for at, (run, picks) in enumerate(calls):
            records: list[tuple[int, str, float, str | None, dict[str, Any]]] = []
            for i, (kind, pick, own, cid) in enumerate(picks):
                # a shared kind reuses one of three objects, as a tool's calls do; else the call's own
                data: dict[str, Any] = _shared[pick] if own is None else own
                if kind == "run_started":
                    data = {"tenant": f"t{pick}", **(own or {})}
                records.append((i, kind, 100.0 + at + i / 64, cid, data))
            held.append_records(run, records)
            first = following.get(run, 0)
            plain.append_many(
                [
                    TraceEvent(run_id=run, seq=first + i, kind=k, ts=ts, call_id=c, data=d)
                    for i, k, ts, c, d in records
                ]
            )
            following[run] = first + len(records)
        for run in following:
            assert held.events(run) == plain.events(run)
            assert held.heads(run) == plain.heads(run)
            assert held.next_seq(run) == plain.next_seq(run) == following[run]
        assert held.runs() == plain.runs()
        for tenant in (None, "t0", "t1", "t2"):
            assert held.tenant_runs(tenant) == plain.tenant_runs(tenant)
    finally:
        held.close()
        plain.close()


def test_a_file_written_with_the_earlier_statements_reads_on_and_is_appended_to_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the earlier chunks of 64, 16, 4 and 1 rows; then this version's, on the same file
    monkeypatch.setattr(sqlite_held, "CHUNKS", (64, 16, 4, 1))
    monkeypatch.setitem(sqlite_held._INSERTS, 64, sqlite_held._statement(64))
    monkeypatch.setitem(sqlite_held._INSERTS, 16, sqlite_held._statement(16))
    monkeypatch.setitem(sqlite_held._INSERTS, 4, sqlite_held._statement(4))
    store = SqliteTraceStore(tmp_path / "t.db")
    for call in range(5):
        store.append_records("r", _nine(call))
    store.close()
    monkeypatch.undo()
    store = SqliteTraceStore(tmp_path / "t.db")
    try:
        for call in range(5, 9):
            store.append_records("r", _nine(call))
        events = store.events("r")
        (summary,) = store.runs()
    finally:
        store.close()
    assert [(e.seq, e.data["call"], e.data["i"], e.kind) for e in events] == [
        (9 * c + i, c, i, kind) for c in range(9) for i, (_, kind, *_rest) in enumerate(_nine(c))
    ]
    assert (summary.events, summary.started_at, summary.last_at) == (81, 10.0, 18.08)
