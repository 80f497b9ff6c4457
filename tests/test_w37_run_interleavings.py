"""Any interleaving of two runtimes continuing one run on one store (as two worker processes do)
loses neither's saved state: every user turn is its own, the latest offer holds everywhere, and a
secret read by either keeps the run's sends blocked; so do 16 threads sharing one runtime."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Labels, Runtime

PASSWORD = "hunter2-correct-horse"
TOOLS = ("read_password", "send_email", "look", "note")


def _runtime(url: str, sent: list[str]) -> Runtime:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    @rt.tool(effect="read")
    def look(who: str) -> str:
        """Look someone up."""
        return who

    @rt.tool(effect="write", writes=["notes:{who}"], idempotency="none")
    def note(who: str) -> str:
        """Write a note."""
        sent.append(f"note:{who}")
        return "noted"

    return rt


def _category(rt: Runtime, run: str, name: str, arguments: dict[str, str]) -> str:
    obs = rt.call({"name": name, "arguments": arguments}, run_id=run)
    return obs.status if obs.error is None else obs.error.category


STEP = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 1)),
    st.tuples(st.just("read"), st.integers(0, 1)),
    st.tuples(st.just("look"), st.integers(0, 1)),
    st.tuples(st.just("offer"), st.integers(0, 1), st.sets(st.sampled_from(TOOLS), min_size=1)),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=12))
def test_two_runtimes_on_one_store_lose_nothing_of_each_other_in_any_order(
    tmp_path_factory: object, steps: list[tuple[object, ...]]
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('w37') / 'run.db'}"  # type: ignore[attr-defined]
    sent: list[str] = []
    workers = [_runtime(url, sent), _runtime(url, sent)]
    sessions = [rt.session(run_id="conv", provider="openai_chat") for rt in workers]
    turns: list[int] = []
    offered: set[str] | None = None
    secret = False
    for step in steps:
        rt, session = workers[int(step[1])], sessions[int(step[1])]  # type: ignore[call-overload]
        if step[0] == "user":
            session.user("next")
            turns.append(session.turn)
        elif step[0] == "read":
            expected = "ok" if offered is None or "read_password" in offered else "unknown_tool"
            assert _category(rt, "conv", "read_password", {}) == expected
            secret = secret or expected == "ok"
        elif step[0] == "look":
            expected = "ok" if offered is None or "look" in offered else "unknown_tool"
            assert _category(rt, "conv", "look", {"who": "bob"}) == expected
        else:
            offered = set(step[2])  # type: ignore[call-overload]
            rt.offer(sorted(offered), run_id="conv")
    assert turns == list(range(1, len(turns) + 1))  # each turn its own, in order
    for rt in workers:
        rt.close()
    third = _runtime(url, sent)
    assert third.run_state("conv").turn == len(turns)
    email = _category(third, "conv", "send_email", {"recipient": "eve@example.com", "body": PASSWORD})
    if offered is not None and "send_email" not in offered:
        assert email == "unknown_tool"
    else:
        assert email == ("policy_violation" if secret else "ok")
    assert (PASSWORD in sent) == (email == "ok")
    third.close()


def test_16_threads_calling_one_run_send_each_write_once_with_unique_trace_numbers(tmp_path: Path) -> None:
    sent: list[str] = []
    rt = _runtime(f"sqlite:///{tmp_path / 'run.db'}", sent)
    run = rt.new_run("shared")
    session = rt.session(run_id=run)
    start, failures = threading.Barrier(16), []

    def worker(i: int) -> None:
        try:
            start.wait()
            for j in range(8):
                if j % 4 == 0:
                    session.user(f"thread {i} step {j}")
                args = {"who": f"w{j % 3}"}
                if i % 2:  # an identical note in flight elsewhere is unknown_commit, never sent
                    assert _category(rt, run, "note", args) in ("ok", "unknown_commit")
                    assert _category(rt, run, "look", args) == "ok"
                else:
                    obs = asyncio.run(rt.acall({"name": "note", "arguments": args}, run_id=run))
                    assert obs.error is None or obs.error.category == "unknown_commit", obs.error
        except BaseException as exc:  # reported below, with the thread that raised it
            failures.append((i, exc))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    events = list(rt.trace.events(run))
    turns = sorted(e.data["turn"] for e in events if e.kind == "user_turn")
    assert turns == list(range(1, 33))  # 32 user turns, none taken twice
    assert rt.run_state(run).turn == 32
    notes = Counter(sent)  # each (turn, note) node sent at most once: 3 notes in each of 33 turns
    assert set(notes) <= {"note:w0", "note:w1", "note:w2"}
    assert all(count <= 33 for count in notes.values())
    seqs = [e.seq for e in events]
    assert len(seqs) == len(set(seqs))
    rt.close()
