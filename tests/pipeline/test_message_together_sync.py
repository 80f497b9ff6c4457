"""The calls of one model message run together from sync code too, wherever their tools run anyway.

From sync code (``rt.call_all``, ``rt.call`` of a message, a session's ``handle``) an async tool
runs on the executor's portal loop and a blocking tool on its worker threads, whoever calls. The
calls of a message naming only such tools run together on that loop, as ``acall_all`` runs them
(pipeline/together.py); a message naming a tool that runs in the calling thread (sync, not
blocking) keeps running one call after the other there. These tests hold it to that, and to ending
exactly as one call after the other.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from tests.pipeline.messages_gen import (
    POLICIES,
    TOGETHER_S,
    Shape,
    Timeline,
    calls_,
    check_together_as_apart,
    hanging,
    kinds,
    message,
    shapes,
)
from tests.pipeline.messages_gen import durable_url as durable_url  # the fixture


def _lookups(
    seen: Timeline, threads: set[int], hold: Mapping[str, Callable[[Timeline], bool]] | None = None
) -> Runtime:
    """``hold``: what a call (by its span name, ``"fetch a"``) waits for once begun (Timeline.wait_for);
    the test may fill it after calls that must not wait."""
    rt = Runtime("memory://")
    holds = hold if hold is not None else {}

    @rt.tool(effect="read", reads=["web:{url}"])
    def fetch(url: str) -> str:
        """Fetch a page (a blocking read: it runs on a worker thread).

        Args:
            url: the page.
        """
        threads.add(threading.get_ident())
        seen.begin(f"fetch {url}")
        if (ready := holds.get(f"fetch {url}")) is not None:
            seen.wait_for(ready)
        time.sleep(0.05)
        seen.end(f"fetch {url}")
        return url.upper()

    @rt.tool(effect="read", reads=["db:{key}"])
    async def lookup(key: str) -> str:
        """Look a key up (an async read: it runs on the executor's loop).

        Args:
            key: the key.
        """
        seen.begin(f"lookup {key}")
        if (ready := holds.get(f"lookup {key}")) is not None:
            await seen.await_for(ready)
        await asyncio.sleep(0.05)
        seen.end(f"lookup {key}")
        return f"{key}={id(asyncio.get_running_loop())}"

    @rt.tool(effect="none")
    def word_count(text: str) -> int:
        """Count words (pure: it runs in the caller's thread).

        Args:
            text: the text.
        """
        threads.add(threading.get_ident())
        seen.begin(f"count {text}")
        seen.end(f"count {text}")
        return len(text.split())

    return rt


def test_a_sync_message_runs_its_blocking_calls_at_once() -> None:
    seen, threads = Timeline(), set[int]()
    with _lookups(seen, threads, {f"fetch {u}": seen.at_once(3) for u in "abc"}) as rt:
        calls = message(("fetch", {"url": "a"}), ("fetch", {"url": "b"}), ("fetch", {"url": "c"}))
        out = rt.call_all(calls, run_id=rt.new_run())
    assert [(o.status, o.data) for o in out] == [("ok", "A"), ("ok", "B"), ("ok", "C")]
    assert seen.most == 3  # one after the other, never more than 1
    assert threading.get_ident() not in threads  # on worker threads, as one at a time


def test_a_sync_message_runs_its_async_calls_at_once_on_the_loop_they_always_ran_on() -> None:
    seen, threads = Timeline(), set[int]()
    hold: dict[str, Callable[[Timeline], bool]] = {}
    rt = _lookups(seen, threads, hold)
    run = rt.new_run()
    alone = rt.call(json.loads(message(("lookup", {"key": "z"})))["tool_calls"][0], run_id=run)
    hold.update({f"lookup {k}": seen.at_once(3) for k in "xyz"})  # the message's calls, not the one alone
    out = rt.call_all(message(*(("lookup", {"key": k}) for k in "xyz")), run_id=run)
    rt.close()
    assert seen.most == 3
    loops = {str(o.data).split("=")[1] for o in [alone, *out]}
    assert len(loops) == 1  # the executor's portal loop, as for one call
    # the same call again in the same run is the same action: the ledger answers it
    assert out[2].data == alone.data


def test_a_message_naming_a_tool_of_the_callers_thread_runs_one_call_after_the_other_there() -> None:
    seen, threads = Timeline(), set[int]()
    rt = _lookups(seen, threads)
    calls = message(("fetch", {"url": "a"}), ("word_count", {"text": "two words"}), ("fetch", {"url": "b"}))
    out = rt.call_all(calls, run_id=rt.new_run())
    assert [o.data for o in out] == ["A", 2, "B"]
    assert seen.most == 1
    assert threading.get_ident() in threads  # word_count ran in the caller's thread, as always


def test_a_sync_message_from_the_portal_thread_runs_one_call_after_the_other() -> None:
    """An async tool (on the portal loop) that calls the runtime with a message of blocking calls:
    waiting on its own loop would never end, so the calls run one after the other."""
    seen, threads = Timeline(), set[int]()
    rt = _lookups(seen, threads)
    run = rt.new_run()
    inner: list[Any] = []

    @rt.tool(effect="read")
    async def crawl(site: str) -> int:
        """Fetch two pages of a site through the runtime.

        Args:
            site: the site.
        """
        got = rt.call_all(
            message(("fetch", {"url": f"{site}/1"}), ("fetch", {"url": f"{site}/2"})), run_id=run
        )
        inner.extend(got)
        return len(got)

    obs = rt.call({"name": "crawl", "arguments": {"site": "s"}}, run_id=run)
    assert (obs.status, obs.data) == ("ok", 2)
    assert [o.data for o in inner] == ["S/1", "S/2"]
    assert seen.most == 1


def test_three_writes_of_a_sync_message_on_a_durable_store_commit_once_and_replay(durable_url: str) -> None:
    sent: list[str] = []
    seen = Timeline()
    rt = Runtime(durable_url)

    @rt.tool(effect="write", writes=["mail:{to}"], idempotency="none")
    def send_mail(to: str, body: str) -> str:
        """Send an e-mail (blocking: a worker thread runs it).

        Args:
            to: the recipient.
            body: the text.
        """
        seen.begin(to)
        if to != "zed":  # the three writes of one message: each holds on until all three began
            seen.wait_for(seen.at_once(3))
        time.sleep(0.05)
        with seen.lock:
            sent.append(to)
        seen.end(to)
        return f"sent to {to}"

    run = rt.new_run()
    # the run sent mail before: its label holds the tool's, so the three writes below run together
    rt.call_all(message(("send_mail", {"to": "zed", "body": "hi"})), run_id=run)
    calls = message(*(("send_mail", {"to": to, "body": "hi"}) for to in ("ann", "bob", "cy")))
    first = rt.call_all(calls, run_id=run)
    again = rt.call_all(calls, run_id=run)
    assert [o.data for o in first] == ["sent to ann", "sent to bob", "sent to cy"]
    assert [o.data for o in again] == [o.data for o in first]
    assert sorted(sent) == ["ann", "bob", "cy", "zed"]
    assert seen.most == 3
    entries = [e for e in rt.ledger.list(limit=10) if e.run_id == run]
    assert sorted(e.state for e in entries) == ["committed"] * 4
    rt.close()


def test_an_interrupted_sync_message_cancels_its_calls_and_keeps_their_events() -> None:
    """The calling thread's wait is interrupted (say, Ctrl-C): every call begun on the portal loop
    is cancelled before the interruption propagates, and what the calls recorded is stored."""
    rt = Runtime("memory://")
    started: list[str] = []
    cancelled: list[str] = []

    hanging(rt, started, cancelled)
    run = rt.new_run()

    class Interrupted(BaseException):
        pass

    def on_signal(signum: int, frame: Any) -> None:
        raise Interrupted

    def interrupt() -> None:
        deadline = time.monotonic() + TOGETHER_S
        while len(started) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    assert threading.current_thread() is threading.main_thread()  # signals reach the main thread
    before = signal.signal(signal.SIGINT, on_signal)
    try:
        threading.Thread(target=interrupt).start()
        with pytest.raises(Interrupted):
            rt.call_all(message(*(("hang", {"url": u}) for u in "abc")), run_id=run)
            time.sleep(5)  # the signal handler runs between two bytecodes of this thread
    finally:
        signal.signal(signal.SIGINT, before)
    assert sorted(started) == ["a", "b", "c"]
    assert sorted(cancelled) == ["a", "b", "c"]
    dispatched = {e.call_id for e in rt.trace.events(run) if e.kind == "dispatched"}
    assert len(dispatched) == 3


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(shapes, min_size=1, max_size=4, unique_by=lambda t: t.name),
    kinds=kinds,
    drawn=st.lists(st.lists(calls_, min_size=2, max_size=5), min_size=1, max_size=3),
    policy=st.sampled_from(list(POLICIES)),
)
def test_a_sync_message_run_together_ends_as_it_ends_one_call_after_the_other(
    tools: list[Shape], kinds: dict[str, str], drawn: list[list[tuple[int, dict[str, Any]]]], policy: str
) -> None:
    """Async tools, blocking tools on worker threads and (now and then) a tool of the caller's
    thread, from sync code: observations, each call's events, ledger entries and the flow state
    are those of one call after the other, no two calls that do not commute ran at once, and a
    tool of the caller's thread ran there (tests/pipeline/messages_gen.py)."""
    check_together_as_apart(tools, drawn, policy, kinds, sync=True)
