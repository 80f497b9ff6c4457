"""A session over PostgreSQL continued by another process, as the world does it.

The first process sends a model message of three calls (a text message, a counter set, a counter
read) and is killed (SIGKILL) at a chosen point of one of its writes: before the intent, after the
intent before the send, after the send before the outcome, after the outcome, or after every
outcome before the answer is rendered. Another process continues the conversation: the model
proposes the same calls again, under the same call ids or new ones, their keys reordered and
``2`` written ``2.0``. The tools count what they really did in a table of their own.

After each step: each write ran at most once in the world; a write whose outcome nobody can know
is ``unknown_commit`` (its recovery in what the model reads); every error has a category and none
is ``internal``; nothing escapes as an exception; every call id the model sent is answered once;
the trace's ``rendered`` and ``observation`` events agree with what the model was told; and after
recovery no ledger entry is left ``accepted`` or ``dispatched``.

Beside the kills: a run restarted between two steps (the next step in another process); two
processes proposing the same writes at the same instant; every other session of the database
ended (``pg_terminate_backend``) while a tool runs; and a store's statement whose own session ends
under it (a trigger ends it), for the ledger's outcome, the trace's records and the run's state.
The kill sweep's other points are ``slow``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actionspace import CATEGORIES, Runtime
from actionspace.session import Turn
from tests.pg import fresh_schema
from tests.proc import WAIT_FOR, at_once, run_child, run_killed
from tests.session.w23_pg_world import chat_message, make_world, world_sends

ROOT = str(Path(__file__).resolve().parents[2])
RUN = "conv"
SMS = ("sms", "+15550100", "running late")
COUNTER = ("counter", "a", "2")
FIRST_IDS: list[str | None] = ["c1", "c2", "c3"]

FIRST = """
import os, signal, sys
url, root, point, count = sys.argv[1:5]
sys.path.insert(0, root)
from actionspace import _crash
from tests.session.w23_pg_world import chat_message, make_world
rt = make_world(url)
s = rt.session(run_id="conv", provider="openai_chat")
s.user("text Bob I am late and set counter a to 2")
if point == "rendered":  # every outcome stored, the answer not yet rendered
    record = rt.record
    def killing(run_id, kind, data, **kw):
        if kind == "rendered":
            os.kill(os.getpid(), signal.SIGKILL)
        return record(run_id, kind, data, **kw)
    rt.record = killing
else:
    _crash.arm(point, int(count))
print("killed", flush=True)  # said before: the kill ends the process at once
s.handle(chat_message(["c1", "c2", "c3"]))
print("not killed", flush=True)
"""


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _answered(turn: Turn) -> list[str]:
    return [m["tool_call_id"] for m in turn.messages]


def _check_turn(rt: Runtime, turn: Turn, sent_ids: list[str | None], before: int, calls: int = 3) -> None:
    """What every turn promises, whatever happened before it."""
    answered = _answered(turn)
    assert len(answered) == len(set(answered)) == len(turn.observations) == calls, turn.messages
    assert all(i in answered for i in sent_ids if i is not None), (sent_ids, answered)
    shown = json.dumps(turn.messages, ensure_ascii=False)
    for obs in turn.observations:
        if obs.error is not None:
            assert obs.error.category in CATEGORIES and obs.error.category != "internal", obs.error
            assert obs.error.category in shown and all(step in shown for step in obs.error.recovery)
    events = rt.trace.events(RUN)[before:]
    kinds = [e.kind for e in events]
    assert kinds.count("model_output") == 1 and kinds[-1] == "rendered", kinds
    assert events[-1].data["results"] == answered
    observed: dict[str, list[tuple[str, str | None]]] = {}
    for e in events:
        if e.kind == "observation":
            observed.setdefault(e.call_id or "", []).append((e.data["status"], e.data.get("category")))
    for obs in turn.observations:
        told = (obs.status, obs.error.category if obs.error else None)
        assert observed.get(obs.call_id, [])[-1:] == [told], (obs.call_id, observed, told)


def _states(rt: Runtime) -> list[str]:
    return sorted(e.state for e in rt.ledger.list())


def _outcomes(turn: Turn) -> list[tuple[str, str | None, bool]]:
    return [
        (o.status, o.error.category if o.error else None, bool(o.diagnostics.get("replayed")))
        for o in turn.observations
    ]


def _expected(point: str, killed_at: int) -> list[tuple[str, str | None, bool]]:
    """The continuation's answers: (status, category, replayed) of the text, the counter, the read."""
    out: list[tuple[str, str | None, bool]] = []
    for write in range(2):
        if (
            write < killed_at
            or point == "rendered"
            or (write == killed_at and point == "after_ledger_commit")
        ):
            out.append(("ok", None, True))  # committed by the killed process: replayed
        elif write > killed_at or point == "before_intent":
            out.append(("ok", None, False))  # never begun: sent now
        else:
            out.append(("error", "unknown_commit", False))  # begun, its outcome lost with the process
    return [*out, ("ok", None, False)]


def _expected_sends(point: str, killed_at: int) -> dict[tuple[str, str, str], int]:
    sends = {}
    for write, action in enumerate((SMS, COUNTER)):
        unsent = write == killed_at and point == "after_intent"
        sends[action] = 0 if unsent else 1
    return sends


KILLS = [  # (point, the write it kills at: 0 the text, 1 the counter, ids of the re-proposal)
    ("after_intent", 0, "new"),
    ("tool_committed", 1, "same"),
]
SLOW_KILLS = [
    ("before_intent", 0, "same"),
    ("after_ledger_commit", 1, "new"),
    ("rendered", 1, "new"),
    ("before_intent", 1, "new"),
    ("after_intent", 0, "same"),
    ("after_intent", 1, "same"),
    ("after_intent", 1, "new"),
    ("tool_committed", 0, "new"),
    ("tool_committed", 1, "new"),
    ("after_ledger_commit", 0, "same"),
    ("rendered", 1, "same"),
]


def _continued(url: str, point: str, killed_at: int, ids: list[str | None], reordered: bool) -> None:
    count = "1" if point == "rendered" else str(killed_at + 1)
    rt = make_world(url)  # open before the kill, as a process of another host already serving
    try:
        assert run_killed(FIRST, url, ROOT, point, count) == "killed"
        s = rt.session(run_id=RUN, provider="openai_chat")
        before = len(rt.trace.events(RUN))
        message = chat_message(ids, reordered=reordered)
        turn = asyncio.run(s.ahandle(message)) if reordered else s.handle(message)  # async: the new ids
        _check_turn(rt, turn, ids, before)
        assert _outcomes(turn) == _expected(point, killed_at)
        assert dict(world_sends(url)) == {a: n for a, n in _expected_sends(point, killed_at).items() if n}
        assert rt.recover().to_dict() is not None
        states = _states(rt)
        assert not {"accepted", "dispatched", "unknown"} & set(states), states
        before = len(rt.trace.events(RUN))
        again = s.handle(chat_message(["d1", "d2", "d3"], reordered=not reordered))  # and once more
        _check_turn(rt, again, ["d1", "d2", "d3"], before)
        assert [o[:2] for o in _outcomes(again)] == [o[:2] for o in _expected(point, killed_at)]
        assert dict(world_sends(url)) == {a: n for a, n in _expected_sends(point, killed_at).items() if n}
    finally:
        rt.close()


def _ids(ids: str) -> list[str | None]:
    return FIRST_IDS if ids == "same" else [None, "x2", "x3"]


@pytest.mark.parametrize(("point", "killed_at", "ids"), KILLS)
def test_a_session_killed_at_a_write_and_continued_by_another_process_sends_each_write_at_most_once(
    url: str, point: str, killed_at: int, ids: str
) -> None:
    _continued(url, point, killed_at, _ids(ids), reordered=ids == "new")


@pytest.mark.slow
@pytest.mark.parametrize(("point", "killed_at", "ids"), SLOW_KILLS)
def test_every_other_kill_point_of_a_continued_session_keeps_its_promises(
    url: str, point: str, killed_at: int, ids: str
) -> None:
    _continued(url, point, killed_at, _ids(ids), reordered=ids == "new")


STEP = """
import json, sys
url, root, ids = sys.argv[1:4]
sys.path.insert(0, root)
from tests.session.w23_pg_world import chat_message, make_world
rt = make_world(url)
s = rt.session(run_id="conv", provider="openai_chat")
turn = s.handle(chat_message(json.loads(ids), reordered=True))
out = [[o.status, o.error.category if o.error else None, bool(o.diagnostics.get("replayed"))]
       for o in turn.observations]
rt.close()
print(json.dumps({"out": out, "answered": [m["tool_call_id"] for m in turn.messages]}), flush=True)
"""


def test_a_run_restarted_between_two_steps_replays_the_first_steps_writes(url: str) -> None:
    """The first step in a process that ends; the next in another, the same calls proposed again
    (keys reordered, new ids) beside a new one."""
    rt = make_world(url)
    rt.session(run_id=RUN, provider="openai_chat").user("text Bob and set a")
    rt.close()
    first = run_child(STEP, url, ROOT, json.dumps(["c1", "c2", "c3"]))
    assert first["out"] == [["ok", None, False]] * 3
    rt = make_world(url)
    try:
        s = rt.session(run_id=RUN, provider="openai_chat")
        before = len(rt.trace.events(RUN))
        message = chat_message(["e1", "e2", "e3"], reordered=True)
        message["tool_calls"].append(
            {
                "id": "e4",
                "type": "function",
                "function": {"name": "set_counter", "arguments": '{"name": "b", "value": 1}'},
            }
        )
        turn = s.handle(message)
        _check_turn(rt, turn, ["e1", "e2", "e3", "e4"], before, calls=4)
        assert _outcomes(turn) == [
            ("ok", None, True),
            ("ok", None, True),
            ("ok", None, False),
            ("ok", None, False),
        ]
        assert dict(world_sends(url)) == {SMS: 1, COUNTER: 1, ("counter", "b", "1"): 1}
    finally:
        rt.close()


AT_ONCE = (
    WAIT_FOR
    + """
import json, sys
url, root, go, ids = sys.argv[1:5]
sys.path.insert(0, root)
from tests.session.w23_pg_world import chat_message, make_world
rt = make_world(url)
s = rt.session(run_id="conv", provider="openai_chat")
print("ready", flush=True)
wait_for(go)
turn = s.handle(chat_message(json.loads(ids)))
out = [[o.status, o.error.category if o.error else None] for o in turn.observations]
rt.close()
print(json.dumps({"out": out, "answered": [m["tool_call_id"] for m in turn.messages]}), flush=True)
"""
)


def test_two_processes_proposing_the_same_writes_at_once_send_each_once(url: str, tmp_path: Path) -> None:
    rt = make_world(url)
    rt.session(run_id=RUN, provider="openai_chat").user("text Bob and set a")
    rt.close()
    go = tmp_path / "go"
    answers = at_once(
        AT_ONCE,
        [
            [url, ROOT, str(go), json.dumps(["p1", "p2", "p3"])],
            [url, ROOT, str(go), json.dumps(["q1", "q2", "q3"])],
        ],
        go,
    )
    assert [a["answered"] for a in answers] == [["p1", "p2", "p3"], ["q1", "q2", "q3"]]
    for answer in answers:
        for status, category in answer["out"]:
            assert status == "ok" or category == "unknown_commit", answers
    assert dict(world_sends(url)) == {SMS: 1, COUNTER: 1}


def _cut_every_other_backend(url: str) -> None:
    """End every other session of the database (the runtime's pool, its liveness mark)."""
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_connection_cut_in_the_middle_of_a_call_breaks_no_promise(url: str, mode: str) -> None:
    cut: list[str] = []

    def during(tool: str) -> None:
        if not cut:
            cut.append(tool)
            _cut_every_other_backend(url)

    rt = make_world(url, during=during)
    try:
        s = rt.session(run_id=RUN, provider="openai_chat")
        s.user("text Bob and set a")
        before = len(rt.trace.events(RUN))
        message = chat_message(["c1", "c2", "c3"])
        turn = s.handle(message) if mode == "sync" else asyncio.run(s.ahandle(message))
        assert cut == ["send_sms"]
        _check_turn(rt, turn, ["c1", "c2", "c3"], before)
        assert dict(world_sends(url)) == {SMS: 1, COUNTER: 1}
        before = len(rt.trace.events(RUN))
        again = s.handle(chat_message(["d1", "d2", "d3"], reordered=True))
        _check_turn(rt, again, ["d1", "d2", "d3"], before)
        assert dict(world_sends(url)) == {SMS: 1, COUNTER: 1}
        rt.recover()
        states = _states(rt)
        assert not {"accepted", "dispatched", "unknown"} & set(states), states
        assert _outcomes(turn) == [("ok", None, False)] * 3  # ran, and said so: not `transient`
        assert _outcomes(again) == [("ok", None, True), ("ok", None, True), ("ok", None, False)]
    finally:
        rt.close()


def _cut_once_inside(url: str, table: str, when: str) -> None:
    """A trigger that ends its own session (``pg_terminate_backend``) inside the first statement
    writing a row of ``table`` for which ``when`` holds: a connection cut mid-statement, the
    statement's transaction aborted. A sequence counts (it is not rolled back with it)."""
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute("CREATE SEQUENCE cut_once")
        pg.execute(
            "CREATE FUNCTION cut_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF {when} AND nextval('cut_once') = 1 THEN"
            " PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;"
            " RETURN NEW; END $$"
        )
        pg.execute(
            f"CREATE TRIGGER cut_once BEFORE INSERT OR UPDATE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION cut_once()"
        )


@pytest.mark.parametrize(
    ("table", "when"),
    [
        ("ledger_entries", "NEW.state = 'committed'"),  # a send's outcome
        ("trace_events", "true"),  # the turn's records
        ("actionspace_run_state", "true"),  # the run's state after the calls
    ],
)
def test_a_store_write_cut_mid_statement_is_made_again_and_breaks_no_promise(
    url: str, table: str, when: str
) -> None:
    """The statement's session ends under it (the server's restart of that backend): it is written
    again on a new connection. The sends' outcomes reach the ledger (the next process replays them,
    not ``unknown_commit`` for sends the model was told had landed), the turn's records reach the
    trace, the run's state is saved (not every call answered ``transient`` after it ran)."""
    rt = make_world(url)
    try:
        s = rt.session(run_id=RUN, provider="openai_chat")
        s.user("text Bob and set a")
        _cut_once_inside(url, table, when)
        before = len(rt.trace.events(RUN))
        turn = s.handle(chat_message(["c1", "c2", "c3"]))
        _check_turn(rt, turn, ["c1", "c2", "c3"], before)
        assert _outcomes(turn) == [("ok", None, False)] * 3
    finally:
        rt.close()
    rt = make_world(url)  # the next process (a new store: nothing of the first's memory)
    try:
        rt.recover()
        assert _states(rt) == ["committed", "committed"]
        s = rt.session(run_id=RUN, provider="openai_chat")
        before = len(rt.trace.events(RUN))
        again = s.handle(chat_message(["d1", "d2", "d3"], reordered=True))
        _check_turn(rt, again, ["d1", "d2", "d3"], before)
        assert _outcomes(again) == [("ok", None, True), ("ok", None, True), ("ok", None, False)]
        assert dict(world_sends(url)) == {SMS: 1, COUNTER: 1}
    finally:
        rt.close()
