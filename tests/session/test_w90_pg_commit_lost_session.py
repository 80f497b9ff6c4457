"""A session over PostgreSQL whose store loses its session during a ``COMMIT`` while a call runs.

A proxy between the runtime and the server cuts the connection at the first, second or third
``COMMIT`` after the text message was sent (the turn's trace appends and the run's state saves):
either the server committed and its answer is dropped, or the ``COMMIT`` itself is dropped. The
turn keeps every promise (each call answered once and ``ok``, the trace's records written once and
agreeing with the answer), the world received each write once, and the next process replays both
writes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.ledger.w90_pg_proxy import Proxy
from tests.pg import fresh_schema
from tests.session.test_w23_pg_continued_session import RUN, _check_turn, _outcomes, _states
from tests.session.w23_pg_world import chat_message, make_world, world_sends

SMS = ("sms", "+15550100", "running late")
COUNTER = ("counter", "a", "2")


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


@pytest.mark.parametrize("skip", [0, 1, 2])
@pytest.mark.parametrize("cut", ["commit_answer", "commit_dropped"])
def test_a_commit_lost_while_a_turn_runs_breaks_no_promise(url: str, cut: str, skip: int) -> None:
    """``skip``: the COMMITs let through first (the turn's trace appends and state saves in turn)."""
    proxy = Proxy(url)
    armed: list[str] = []

    def during(tool: str) -> None:
        if not armed:
            armed.append(tool)
            proxy.arm(cut, skip=skip)

    rt = make_world(proxy.url, during=during)
    try:
        s = rt.session(run_id=RUN, provider="openai_chat")
        s.user("text Bob and set a")
        before = len(rt.trace.events(RUN))
        turn = s.handle(chat_message(["c1", "c2", "c3"]))
        assert armed == ["send_sms"] and proxy.acted == [cut]
        _check_turn(rt, turn, ["c1", "c2", "c3"], before)
        assert _outcomes(turn) == [("ok", None, False)] * 3
        events = rt.trace.events(RUN)
        seen = Counter((e.kind, e.call_id) for e in events[before:] if e.kind == "observation")
        assert sorted(seen.values()) == [1, 1, 1], seen
    finally:
        rt.close()
        proxy.close()
    rt = make_world(url)  # the next process
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
