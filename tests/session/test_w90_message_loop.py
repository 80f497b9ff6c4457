"""A model loop's messages through the runtime, as a live loop sends them.

A message of three calls whose write timed out after its side effect, then re-proposed under a
new id; a message cut mid-output; call ids reused across turns; and generated messages mixing
valid, malformed and duplicated calls. Every call ends as exactly one observation carrying a
category (or ``ok``), the trace's observations join the calls by id, and the same message run
again by a second ``Runtime`` on the same SQLite file sends no write twice. Each side effect is
counted by the tool itself, whatever the runtime believes.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery.render import once_per_id
from actionspace.errors import CATEGORIES
from actionspace.session import Session
from actionspace.types import Observation
from tests.store_faults import down

Sent = list[tuple[str, str]]


def _world(url: str, sent: Sent, *, lost: frozenset[str] = frozenset()) -> Runtime:
    """``send`` (external, no idempotency: its answer lost after the side effect for a recipient
    in ``lost``), ``note`` (a write) and ``look`` (a read of what ``note`` wrote)."""
    rt = Runtime(url, recover_on_start=False)
    notes: dict[str, int] = {}

    @rt.tool(effect="external", idempotency="none", writes=["sms:{to}"])
    def send(to: str, text: str) -> dict[str, Any]:
        """Send a text message."""
        sent.append((to, text))
        if to in lost:
            raise TimeoutError("the carrier did not answer")
        return {"sent": True}

    @rt.tool(effect="write", writes=["note:{key}"])
    def note(key: str, value: int) -> dict[str, Any]:
        """Write a note."""
        sent.append((f"note:{key}", str(value)))
        notes[key] = value
        return {"key": key, "value": value}

    @rt.tool(effect="read", reads=["note:{key}"])
    def look(key: str) -> dict[str, Any]:
        """Read a note."""
        return {"key": key, "value": notes.get(key)}

    return rt


def _chat(*calls: tuple[str | None, str, str]) -> dict[str, Any]:
    """An OpenAI chat message of (call id or None, tool, arguments text)."""
    entries = []
    for cid, name, args in calls:
        entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
        if cid is not None:
            entry["id"] = cid
        entries.append(entry)
    return {"role": "assistant", "content": None, "tool_calls": entries}


def _one_each(out: list[Observation] | tuple[Observation, ...]) -> None:
    """Each observation is final and typed: ``ok``, or an error of a known category."""
    for obs in out:
        assert not obs.provisional
        assert obs.status == "ok" or (obs.error is not None and obs.error.category in CATEGORIES), obs


def _traced_since(rt: Runtime, run_id: str, seq: int) -> list[tuple[str | None, str | None]]:
    """(call id, category) of each observation event stored from event ``seq`` on."""
    return [
        (e.call_id, e.data.get("category"))
        for e in rt.trace.events(run_id)
        if e.kind == "observation" and e.seq >= seq
    ]


def _next_seq(rt: Runtime, run_id: str) -> int:
    return max((e.seq for e in rt.trace.events(run_id)), default=-1) + 1


def _joined(
    out: list[Observation] | tuple[Observation, ...], traced: list[tuple[str | None, str | None]]
) -> None:
    """The trace's observations of a message are its answers, one per call id, in any order."""
    answered = Counter((o.call_id, _category(o)) for o in out)
    assert Counter(traced) == answered, (traced, answered)


def _category(obs: Observation) -> str | None:
    return None if obs.error is None else obs.error.category


def _handle(s: Session, raw: Any, mode: str) -> tuple[Observation, ...]:
    turn = s.handle(raw) if mode == "sync" else asyncio.run(s.ahandle(raw))
    return turn.observations


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_that_timed_out_in_a_message_of_three_is_never_sent_again(tmp_path: Path, mode: str) -> None:
    sent: Sent = []
    rt = _world(f"sqlite:///{tmp_path / 'a.db'}", sent, lost=frozenset({"bob"}))
    try:
        s = rt.session(run_id="loop", provider="openai_chat")
        s.user("text bob, note 1 under k and read it back")
        mark = _next_seq(rt, "loop")
        first = _handle(
            s,
            _chat(
                ("c1", "send", json.dumps({"to": "bob", "text": "hi"})),
                ("c2", "note", json.dumps({"key": "k", "value": 1})),
                ("c3", "look", json.dumps({"key": "k"})),
            ),
            mode,
        )
        _one_each(first)
        assert [o.call_id for o in first] == ["c1", "c2", "c3"]
        assert first[0].error is not None and first[0].error.category == "unknown_commit"
        assert first[1].ok and first[2].ok and first[2].data == {"key": "k", "value": 1}
        _joined(first, _traced_since(rt, "loop", mark))
        # the model re-proposes the write that timed out (a new id), and the note again
        mark = _next_seq(rt, "loop")
        again = _handle(
            s,
            _chat(
                ("c4", "send", json.dumps({"text": "hi", "to": "bob"})),
                ("c5", "note", json.dumps({"key": "k", "value": 1})),
            ),
            mode,
        )
        _one_each(again)
        assert again[0].error is not None and again[0].error.category == "unknown_commit"
        assert again[1].ok and again[1].diagnostics.get("replayed") is True
        _joined(again, _traced_since(rt, "loop", mark))
        assert sent == [("bob", "hi"), ("note:k", "1")]  # each side effect once
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_message_cut_mid_output_runs_none_of_its_calls(tmp_path: Path, mode: str) -> None:
    sent: Sent = []
    rt = _world(f"sqlite:///{tmp_path / 'a.db'}", sent)
    try:
        s = rt.session(run_id="cut", provider="openai_chat")
        s.user("text bob and ann")
        whole = json.dumps({"to": "ann", "text": "hello"})
        mark = _next_seq(rt, "cut")
        out = _handle(
            s,
            _chat(("c1", "send", json.dumps({"to": "bob", "text": "hi"})), ("c2", "send", whole[:-7])),
            mode,
        )
        _one_each(out)
        assert [o.call_id for o in out] == ["c1", "c2"]
        assert all(o.error is not None and o.error.category == "parse_error" for o in out)
        _joined(out, _traced_since(rt, "cut", mark))
        assert sent == []
    finally:
        rt.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_id_reused_in_a_later_turn_is_a_call_of_its_own(tmp_path: Path, mode: str) -> None:
    sent: Sent = []
    rt = _world(f"sqlite:///{tmp_path / 'a.db'}", sent)
    try:
        s = rt.session(run_id="reuse", provider="openai_chat")
        marks, answers = [], []
        for turn, value in enumerate((1, 2, 2), start=1):
            s.user(f"note {value} under k")
            marks.append(_next_seq(rt, "reuse"))
            raw = _chat(("c1", "note", json.dumps({"key": "k", "value": value})))
            answers.append(_handle(s, raw, mode))
            assert s.turn == turn
        events = rt.trace.events("reuse")
        ends = [*marks[1:], events[-1].seq + 1]
        for out, mark, end in zip(answers, marks, ends, strict=True):
            _one_each(out)
            assert [o.call_id for o in out] == ["c1"] and out[0].ok
            traced = [
                (e.call_id, e.data.get("category"))
                for e in events
                if e.kind == "observation" and mark <= e.seq < end
            ]
            _joined(out, traced)  # each turn's observation joins that turn's call
        nodes = [e.data["node_id"] for e in events if e.kind == "dispatched" and e.call_id == "c1"]
        assert len(nodes) == len(set(nodes)) == 3  # three turns, three actions under one id
        assert sent == [("note:k", "1"), ("note:k", "2"), ("note:k", "2")]  # a new turn is a new action
    finally:
        rt.close()


_IDS = st.sampled_from(["a", "b", "c", None])
_CALL = st.one_of(
    st.tuples(
        st.just("send"), st.fixed_dictionaries({"to": st.sampled_from(["bob", "ann"]), "text": st.just("hi")})
    ),
    st.tuples(
        st.just("note"),
        st.fixed_dictionaries({"key": st.sampled_from(["k", "j"]), "value": st.integers(0, 2)}),
    ),
    st.tuples(st.just("look"), st.fixed_dictionaries({"key": st.just("k")})),
    st.tuples(
        st.just("note"), st.fixed_dictionaries({"key": st.just("k"), "value": st.just("two")})
    ),  # invalid
    st.tuples(st.just("sned"), st.fixed_dictionaries({"to": st.just("bob")})),  # unknown tool
)
_ENTRY = st.tuples(_IDS, _CALL, st.sampled_from(["whole", "whole", "whole", "cut", "not_json"]))


def _entries(drawn: list[tuple[str | None, tuple[str, dict[str, Any]], str]]) -> dict[str, Any]:
    calls: list[tuple[str | None, str, str]] = []
    for cid, (name, args), shape in drawn:
        text = json.dumps(args)
        if shape == "cut":
            text = text[: len(text) // 2]
        elif shape == "not_json":
            text = "to=bob"
        calls.append((cid, name, text))
    return _chat(*calls)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    drawn=st.lists(_ENTRY, min_size=1, max_size=5),
    mode=st.sampled_from(["sync", "async", "session"]),
    unsaved=st.booleans(),
)
def test_any_message_ends_in_one_typed_answer_per_id_traced_and_never_sent_twice(
    drawn: list[tuple[str | None, tuple[str, dict[str, Any]], str]], mode: str, unsaved: bool
) -> None:
    """``unsaved``: the first runtime's run-state store fails every save under the message."""
    raw = _entries(drawn)
    given_ids = [cid for cid, _, _ in drawn if cid is not None]
    malformed = len(given_ids) != len(set(given_ids)) or any(shape != "whole" for _, _, shape in drawn)
    withheld: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'a.db'}"
        sent: Sent = []
        outs: list[list[Observation]] = []
        for _ in range(2):  # the message, then the same message again by a second runtime on the file
            rt = _world(url, sent, lost=frozenset({"ann"}))  # a text to ann is sent, its answer lost
            try:
                rt.new_run("gen")
                mark = _next_seq(rt, "gen")
                if mode == "session":
                    s = rt.session(run_id="gen", provider="openai_chat")
                    if not outs:
                        s.user("do it")
                        mark = _next_seq(rt, "gen")
                put_back = _saves_fail(rt) if unsaved and not outs else None
                try:
                    if mode == "session":  # a session's turn: its rendered answer holds one result per id
                        turn = s.handle(raw)
                        out = list(once_per_id(turn.observations))
                        assert [m["tool_call_id"] for m in turn.messages] == [o.call_id for o in out]
                    elif mode == "sync":
                        out = rt.call_all(raw, run_id="gen")
                    else:
                        out = asyncio.run(rt.acall_all(raw, run_id="gen"))
                finally:
                    if put_back is not None:
                        put_back()
                _one_each(out)
                ids = [o.call_id for o in out]
                assert len(ids) == len(set(ids)), ids  # one answer per id
                if malformed:  # none runs; each id the model gave answered once (none given: one answer)
                    assert ids == (list(dict.fromkeys(given_ids)) or ["gen:parse"])
                    assert all(_category(o) in {"parse_error", "transient"} for o in out)
                else:  # one answer per call, under the id the model gave it
                    assert len(out) == len(drawn) and [i for i in ids if i in given_ids] == given_ids
                _joined(out, _traced_since(rt, "gen", mark))
                if not outs:
                    events = rt.trace.events("gen")
                    withheld = {str(e.call_id): e.data["withheld"] for e in events if "withheld" in e.data}
                    dispatched = [
                        e
                        for e in events
                        if e.kind == "dispatched" and e.seq >= mark and e.data["tool"] != "look"
                    ]
                    sent_first = len(sent)
                outs.append(out)
            finally:
                rt.close()
    assert len(sent) == sent_first, sent  # the second runtime sent nothing again
    writes = [i for i, o in enumerate(outs[0]) if o.tool in {"send", "note"}]
    assert len(sent) == len(dispatched), (sent, outs[0])  # the trace shows each send, saved or not
    if not unsaved:  # each write the first runtime ran was sent once; the second answered it from the ledger
        assert len(sent) >= len([i for i in writes if outs[0][i].ok])
        assert [(o.status, _category(o)) for o in outs[1]] == [(o.status, _category(o)) for o in outs[0]]
        assert all(outs[1][i].diagnostics.get("replayed") is True for i in writes if outs[1][i].ok)
        return
    for i in writes:  # what the first runtime withheld as done, the second answers from the ledger
        if withheld.get(outs[0][i].call_id, {}).get("status") == "ok":
            assert outs[1][i].ok and outs[1][i].diagnostics.get("replayed") is True, (outs[0][i], outs[1][i])


def _saves_fail(rt: Runtime) -> Any:
    """Every save of the run-state store raises (waited for or not); returns the undo."""
    store = rt.engine.runs.run_states
    undo = [down(store, "save")]
    if hasattr(store, "save_later"):
        undo.append(down(store, "save_later"))
    return lambda: [u() for u in undo]
