"""The calls of one model message run together where that changes nothing but the wall time.

A model that proposes several calls in one message (OpenAI's parallel tool calls, Anthropic's
several ``tool_use`` blocks) proposed them all before seeing any result. ``rt.acall_all`` and the
session's ``ahandle`` begin a call's tool without waiting for the calls before it to end when
their read/write sets commute and the call meets the decisions it would meet after them
(pipeline/together.py, ``run_together``). These tests hold it to that: tools that commute
overlap, tools that do not run in the message's order, a label that would change a decision makes
the call wait, and a generated message ends exactly as it ends one call after the other.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy.flow_policies import DEFAULT_FLOW_POLICY
from tests.pipeline.messages_gen import (
    POLICIES,
    TOGETHER_S,
    Shape,
    Timeline,
    calls_,
    check_together_as_apart,
    hanging,
    message,
    shapes,
)
from tests.pipeline.messages_gen import durable_url as durable_url  # the fixture

Hold = Mapping[str, Callable[[Timeline], bool]]
"""What a tool call (by its span name, ``"fetch a"``) waits for once begun (Timeline.await_for)."""


def _docs_runtime(seen: Timeline, docs: dict[str, str], hold: Hold | None = None, **kw: Any) -> Runtime:
    rt = Runtime("memory://", **kw)
    holds: Hold = hold if hold is not None else {}

    @rt.tool(effect="read", reads=["web:{url}"])
    async def fetch(url: str, wait_ms: int = 30) -> str:
        """Fetch a page.

        Args:
            url: the page.
            wait_ms: how long the page takes.
        """
        seen.begin(f"fetch {url}")
        if (ready := holds.get(f"fetch {url}")) is not None:
            await seen.await_for(ready)
        await asyncio.sleep(wait_ms / 1000)
        seen.end(f"fetch {url}")
        return url.upper()

    @rt.tool(effect="write", writes=["doc:{name}"], idempotency="none")
    async def save(name: str, text: str) -> bool:
        """Save a document.

        Args:
            name: the document.
            text: its new text.
        """
        seen.begin(f"save {name} {text}")
        if (ready := holds.get(f"save {name} {text}")) is not None:
            await seen.await_for(ready)
        await asyncio.sleep(0.02)
        docs[name] = text
        seen.end(f"save {name} {text}")
        return True

    return rt


def test_the_calls_of_one_message_run_at_once_when_they_commute() -> None:
    seen = Timeline()
    with _docs_runtime(seen, {}, {f"fetch {u}": seen.at_once(3) for u in "abc"}) as rt:
        calls = message(("fetch", {"url": "a"}), ("fetch", {"url": "b"}), ("fetch", {"url": "c"}))
        out = asyncio.run(rt.acall_all(calls, run_id=rt.new_run()))
    assert [(o.status, o.data) for o in out] == [("ok", "A"), ("ok", "B"), ("ok", "C")]
    assert seen.most == 3  # one after the other, never more than 1


def test_calls_that_do_not_commute_run_in_the_message_order_and_the_others_beside_them() -> None:
    seen: Timeline = Timeline()
    docs: dict[str, str] = {}
    # the first two saves commute: each holds on until the other began (one after the other, the
    # first would wait out TOGETHER_S alone and the overlap below would fail)
    hold = {"save x first": seen.begun("save y other"), "save y other": seen.begun("save x first")}
    rt = _docs_runtime(seen, docs, hold)
    run = rt.new_run()
    # A write is judged on the run label: until the run label holds what a save adds (the
    # tool's own label), a save waits for the one before it to be shown, as one after the other.
    asyncio.run(rt.acall_all(message(("save", {"name": "z", "text": "0"})), run_id=run))
    calls = message(
        ("save", {"name": "x", "text": "first"}),
        ("save", {"name": "y", "text": "other"}),
        ("save", {"name": "x", "text": "second"}),
    )
    out = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.status for o in out] == ["ok", "ok", "ok"]
    assert docs == {"z": "0", "x": "second", "y": "other"}
    assert seen.overlap("save x first", "save y other")
    assert not seen.overlap("save x first", "save x second")
    assert seen.spans["save x first"][1] < seen.spans["save x second"][0]
    # both writes of x reached the ledger as two actions, neither replayed nor held as pending
    assert [e.state for e in rt.ledger.list(limit=10)].count("committed") == 4
    rt.close()


def test_observations_come_in_the_message_order_whatever_ends_first() -> None:
    seen = Timeline()
    # a, begun first, ends only after c ended: the order of the ends is certain, not a race of sleeps
    rt = _docs_runtime(seen, {}, {"fetch a": seen.ended("fetch c")})
    calls = message(*((("fetch", {"url": u, "wait_ms": w})) for u, w in (("a", 60), ("b", 30), ("c", 1))))
    run = rt.new_run()
    out = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.data for o in out] == ["A", "B", "C"]
    assert seen.spans["fetch c"][1] < seen.spans["fetch a"][1]  # c ended first
    events = rt.trace.events(run)
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    for obs in out:  # each call's own events in their order
        kinds = [e.kind for e in events if e.call_id == obs.call_id]
        assert kinds.index("dispatched") < kinds.index("observation")
    rt.close()


def test_a_call_whose_decision_reads_a_label_waits_for_the_calls_that_would_change_it() -> None:
    """A secret read, then an external send in the same message: the send is judged on the run
    label with the secret in it, as it is one call after the other, and never runs."""
    sent: list[str] = []

    def build(together: bool) -> Runtime:
        rt = Runtime("memory://", flow_policy=DEFAULT_FLOW_POLICY)

        @rt.tool(effect="read", labels={"confidentiality": "secret"})
        async def read_salary(person: str) -> int:
            """A person's salary.

            Args:
                person: who.
            """
            await asyncio.sleep(0.02)
            return 100

        @rt.tool(effect="external", labels={"sink": True}, idempotency="none")
        async def post(text: str) -> bool:
            """Post publicly.

            Args:
                text: what to post.
            """
            sent.append(text)
            return True

        rt.engine.messages.together = together
        return rt

    calls = message(("read_salary", {"person": "ann"}), ("post", {"text": "hello"}))
    outcomes = []
    for together in (True, False):
        rt = build(together)
        run = rt.new_run()
        # both names resolved by the run first (a post refused at validation sends nothing)
        warm = asyncio.run(rt.acall_all(message(("post", {"text": 5}), ("read_salary", {})), run_id=run))
        assert [o.error and o.error.category for o in warm] == ["invalid_arguments"] * 2
        out = asyncio.run(rt.acall_all(calls, run_id=run))
        outcomes.append([(o.status, o.error and o.error.category) for o in out])
        rt.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][0] != "ok" and sent == []


def test_cancelling_a_message_cancels_every_call_begun_and_keeps_their_events() -> None:
    rt = Runtime("memory://")
    started: list[str] = []
    cancelled: list[str] = []
    hanging(rt, started, cancelled)
    run = rt.new_run()

    async def main() -> None:
        task = asyncio.create_task(rt.acall_all(message(*(("hang", {"url": u}) for u in "abc")), run_id=run))
        deadline = time.monotonic() + TOGETHER_S  # every call of the message begins at once
        while len(started) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert sorted(started) == ["a", "b", "c"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(cancelled) == ["a", "b", "c"]
    dispatched = {e.call_id for e in rt.trace.events(run) if e.kind == "dispatched"}
    assert len(dispatched) == 3
    rt.close()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(shapes, min_size=1, max_size=4, unique_by=lambda t: t.name),
    drawn=st.lists(st.lists(calls_, min_size=2, max_size=6), min_size=1, max_size=3),
    policy=st.sampled_from(list(POLICIES)),
)
def test_a_message_run_together_ends_as_it_ends_one_call_after_the_other(
    tools: list[Shape], drawn: list[list[tuple[int, dict[str, Any]]]], policy: str
) -> None:
    """Observations, each call's events, ledger entries and the flow state are the same; no two
    calls whose read/write sets do not commute ever ran at once (tests/pipeline/messages_gen.py)."""
    check_together_as_apart(tools, drawn, policy)


def test_writes_of_one_message_on_a_durable_store_commit_once_and_a_reproposal_replays_them(
    durable_url: str,
) -> None:
    """Three writes run together on a durable store (on SQLite their intents share commits); the
    model proposing the same message again in the same turn (it timed out waiting) gets each
    answer back from the ledger, and no tool runs twice."""
    sent: list[str] = []
    seen = Timeline()
    rt = Runtime(durable_url)

    @rt.tool(effect="write", writes=["mail:{to}"], idempotency="none")
    async def send_mail(to: str, body: str) -> str:
        """Send an e-mail.

        Args:
            to: the recipient.
            body: the text.
        """
        seen.begin(to)
        if to != "zed":  # the three writes of one message: each holds on until all three began
            await seen.await_for(seen.at_once(3))
        await asyncio.sleep(0.05)
        sent.append(to)
        seen.end(to)
        return f"sent to {to}"

    run = rt.new_run()
    # the run sent mail before: its label holds the tool's, so the three writes below run together
    asyncio.run(rt.acall_all(message(("send_mail", {"to": "zed", "body": "hi"})), run_id=run))
    calls = message(*(("send_mail", {"to": to, "body": "hi"}) for to in ("ann", "bob", "cy")))
    first = asyncio.run(rt.acall_all(calls, run_id=run))
    again = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.data for o in first] == ["sent to ann", "sent to bob", "sent to cy"]
    assert [o.data for o in again] == [o.data for o in first]
    assert sorted(sent) == ["ann", "bob", "cy", "zed"]
    assert seen.most == 3  # the three writes of the message ran together
    entries = [e for e in rt.ledger.list(limit=10) if e.run_id == run]
    assert sorted(e.state for e in entries) == ["committed"] * 4
    rt.close()


def test_a_message_proposed_again_while_its_calls_still_run_sends_nothing_twice() -> None:
    """The agent loop timed out and the model proposed the same message again while the first
    one's writes were still running: each call of the second waits for its identical action in
    flight and answers what it answered; each write reaches the world once."""
    sent: list[str] = []
    rt = Runtime("memory://")
    release = asyncio.Event()

    @rt.tool(effect="write", writes=["mail:{to}"], idempotency="none")
    async def send_mail(to: str) -> str:
        """Send an e-mail.

        Args:
            to: the recipient.
        """
        sent.append(to)
        if to != "zed":
            await release.wait()
        return f"sent to {to}"

    run = rt.new_run()
    # the run sent mail before: its label holds the tool's, so the three writes below run together
    asyncio.run(rt.acall_all(message(("send_mail", {"to": "zed"})), run_id=run))
    calls = message(*(("send_mail", {"to": to}) for to in ("ann", "bob", "cy")))

    async def main() -> tuple[list[Any], list[Any]]:
        first = asyncio.create_task(rt.acall_all(calls, run_id=run))
        deadline = time.monotonic() + TOGETHER_S
        while len(sent) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert sorted(sent) == ["ann", "bob", "cy", "zed"]  # the three writes began together
        second = asyncio.create_task(rt.acall_all(calls, run_id=run))
        await asyncio.sleep(0.05)
        assert not second.done()  # waiting for the writes in flight, not sending them again
        release.set()
        return await first, await second

    first, second = asyncio.run(main())
    assert [o.data for o in first] == ["sent to ann", "sent to bob", "sent to cy"]
    assert [o.data for o in second] == [o.data for o in first]
    assert sorted(sent) == ["ann", "bob", "cy", "zed"]
    rt.close()


def test_when_deciding_whether_a_call_may_begin_fails_the_call_waits_and_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actionspace.pipeline import together

    def broken(*_: Any) -> bool:
        raise RuntimeError("a bug in the decision")

    monkeypatch.setattr(together, "prepares_alike", broken)
    seen = Timeline()
    rt = _docs_runtime(seen, {})
    calls = message(("fetch", {"url": "a"}), ("fetch", {"url": "b"}))
    with rt:
        out = asyncio.run(rt.acall_all(calls, run_id=rt.new_run()))
    assert [(o.status, o.data) for o in out] == [("ok", "A"), ("ok", "B")]
    assert seen.most == 1  # one after the other
