"""A process killed (SIGKILL) between a write's intent and its outcome, and the run continued by
other processes that propose the same write again as a model does: the same tool and arguments in
the same run, no node id (the runtime finds the node from the action).

The payment service counts what it really received (a file), whatever the runtimes believe. The
first process dies inside the send, before the service received it or after; its entry stays
``dispatched``. A process continuing the run at once, another process of the store alive beside
it, cannot know whether the holder still lives: it answers ``unknown_commit`` (DESIGN §11), never
``transient``, and sends nothing (with no other process alive the holder is certainly dead:
tests/test_w21_proc_dead_holder_answered_at_once.py). Once no holder can be alive (the entry older
than the tool's holder window), a proposal settles it as recovery does: the status query's
"committed" is replayed, "not committed" is sent once, and a tool that cannot be asked stays
``unknown_commit``. Two processes doing that at the same instant send at most
once between them. SQLite file and PostgreSQL schema alike.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from actionspace import Runtime, ToolCall
from actionspace.ledger import commit
from actionspace.ledger.commit import holder_window
from tests.proc import BESIDE, WAIT_FOR, Ahead, Child, at_once, run_killed, sent
from tests.proc import url as url  # the fixture

TOOLS = """
import json, os, signal, sys, time
from pathlib import Path
from actionspace.ledger.status import Committed, NotCommitted

def add_tools(rt, outbox, die, idempotency):
    # pay: a payment service writing what it receives to outbox; die ("before"/"after" it received
    # the payment) kills this process inside the send, the entry's intent durable, its outcome not
    def pay(to: str, cents: int) -> str:
        if die == "before":
            print("killed", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\\n")
        if die == "after":
            print("killed", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return "paid"

    def paid(*, key, arguments):
        received = Path(outbox).read_text().splitlines() if os.path.exists(outbox) else []
        return Committed("paid") if received else NotCommitted()

    asked = {"status_query": paid} if idempotency == "query" else {}
    rt.add_tool(
        name="pay", fn=pay, effect="external", idempotency=idempotency, timeout_s=5.0, **asked,
        input_schema={"type": "object", "properties": {"to": {"type": "string"},
                      "cents": {"type": "integer"}}, "required": ["to", "cents"]},
    )
"""

FIRST = (
    TOOLS
    + """
from actionspace import Runtime, ToolCall
url, outbox, die, idempotency = sys.argv[1:5]
rt = Runtime(url, recover_on_start=False)
add_tools(rt, outbox, die, idempotency)
rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c1"), run_id="r")
print("not killed", flush=True)
"""
)

AGAIN = (
    TOOLS
    + WAIT_FOR
    + """
from actionspace import Runtime, ToolCall
url, outbox, idempotency, go = sys.argv[1:5]
rt = Runtime(url, recover_on_start=False)
add_tools(rt, outbox, "no", idempotency)
print("ready", flush=True)
wait_for(go)
obs = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c2"), run_id="r")
rt.close()
print(json.dumps({"status": obs.status, "error": obs.error.category if obs.error else None,
                  "data": obs.data, "pid": os.getpid()}))
"""
)


def _aged(url: str, seconds: float) -> None:
    """Every ledger entry of the store made ``seconds`` older, as if its send was that long ago: the
    processes settling it read the real clock, so each one's own sends are as young as they are."""
    update = "UPDATE ledger_entries SET created_at = created_at - {0}, updated_at = updated_at - {0}"
    if url.startswith("sqlite:///"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(update.format("?"), (seconds, seconds))
        return
    with psycopg.connect(url) as pg:
        pg.execute(update.format("%s"), (seconds, seconds))


def _killed(url: str, outbox: Path, die: str, idempotency: str) -> None:
    assert run_killed(FIRST, url, str(outbox), die, idempotency) == "killed"
    assert len(sent(outbox)) == (1 if die == "after" else 0)


def _proposed_here(url: str, outbox: Path, idempotency: str) -> tuple[Any, list[Any]]:
    rt = Runtime(url, recover_on_start=False)
    scope: dict[str, Any] = {}
    exec(TOOLS, scope)
    scope["add_tools"](rt, str(outbox), "no", idempotency)
    try:
        obs = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c2"), run_id="r")
        states = [e.state for e in rt.ledger.list()]
    finally:
        rt.close()
    return obs, states


def _window() -> float:
    rt = Runtime("memory://")
    scope: dict[str, Any] = {}
    exec(TOOLS, scope)
    scope["add_tools"](rt, "/nonexistent", "no", "query")
    try:
        return holder_window(rt.catalog.get("pay"))
    finally:
        rt.close()


@pytest.mark.parametrize("idempotency", ["query", "none"])
@pytest.mark.parametrize("die", ["before", "after"])
def test_a_re_proposal_beside_a_killed_send_answers_unknown_commit_and_sends_nothing(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, die: str, idempotency: str
) -> None:
    """At once after the kill, a process alive beside: it may be the holder, as far as this process
    can tell. The wait for it is cut short here (it is 30 s): what matters is the answer after it."""
    outbox = tmp_path / "outbox.jsonl"
    with Child(BESIDE, url, str(tmp_path / "release")) as beside:
        beside.expect("ready")
        _killed(url, outbox, die, idempotency)
        monkeypatch.setattr(commit, "MAX_WAIT_S", 0.3)
        obs, states = _proposed_here(url, outbox, idempotency)
        (tmp_path / "release").touch()
        beside.finish()
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert obs.error.details.get("idempotency_key"), obs.error
    assert states == ["dispatched"]  # left to its holder, or to a proposal once none can be alive
    assert len(sent(outbox)) == (1 if die == "after" else 0)


@pytest.mark.parametrize(
    ("die", "idempotency", "answer", "sends"),
    [
        ("after", "query", ("ok", None), 1),  # the service has it: replayed, not sent
        ("before", "query", ("ok", None), 1),  # the service never got it: sent, once
        ("after", "none", ("error", "unknown_commit"), 1),  # cannot be asked: for a person
        ("before", "none", ("error", "unknown_commit"), 0),
    ],
)
def test_a_re_proposal_once_no_holder_can_live_settles_the_killed_send(
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    die: str,
    idempotency: str,
    answer: tuple[str, str | None],
    sends: int,
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    _killed(url, outbox, die, idempotency)
    monkeypatch.setattr(commit, "time", Ahead(_window() + 1.0))
    obs, _ = _proposed_here(url, outbox, idempotency)
    assert (obs.status, obs.error.category if obs.error else None) == answer, obs
    assert len(sent(outbox)) == sends
    monkeypatch.undo()
    again, states = _proposed_here(url, outbox, idempotency)  # and again: the same answer, no send
    assert (again.status, again.error.category if again.error else None) == answer, again
    assert states == ["committed" if answer[0] == "ok" else "unknown_commit"]
    assert len(sent(outbox)) == sends


@pytest.mark.parametrize("die", ["before", "after"])
def test_two_processes_settling_one_killed_send_at_once_send_it_at_most_once(
    url: str, tmp_path: Path, die: str
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    _killed(url, outbox, die, "query")
    _aged(url, _window() + 1.0)
    args = [url, str(outbox), "query", str(tmp_path / "go")]
    answers = at_once(AGAIN, [args, args], tmp_path / "go")
    payments = sent(outbox)
    assert len(payments) == 1, payments  # received once: by the killed process, or one of these
    assert [a["status"] for a in answers] == ["ok", "ok"], answers
    settlers = {a["pid"] for a in answers}
    assert (payments[0]["pid"] in settlers) is (die == "before")  # sent again only when never received
    assert all(json.dumps(a["data"]) == json.dumps(answers[0]["data"]) for a in answers)


def test_two_processes_proposing_one_write_of_a_fresh_run_at_once_send_it_once(
    url: str, tmp_path: Path
) -> None:
    """No kill: both propose at the same instant; one sends, the other waits for it and replays."""
    outbox = tmp_path / "outbox.jsonl"
    args = [url, str(outbox), "query", str(tmp_path / "go")]
    answers = at_once(AGAIN, [args, args], tmp_path / "go")
    assert [a["status"] for a in answers] == ["ok", "ok"], answers
    assert len(sent(outbox)) == 1
