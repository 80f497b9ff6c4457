"""The PostgreSQL store: a signal handler's ``Exception`` landing just after the intent's insert.

The insert runs in autocommit: once the statement returns, the intent is committed. An exception
a signal handler raises as the store's insert step returns reached the intent's step as any store
failure does, and the call answered "the ledger could not record the intent" though its entry is in
the database, ``dispatched``. An exception landing before the insert is still "nothing recorded".
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from tests.pg import fresh_schema

SCHEMA = {"type": "object", "properties": {"key": {"type": "string"}}}


class Alarm(RuntimeError):
    """What the signal handler raises: an ``Exception``, as an alarm's timeout error is."""


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _alarm_at(name: str, event: str) -> Callable[[FrameType, str, Any], Any]:
    """A trace function raising :class:`Alarm` once, as the first frame of ``name`` begins
    (``event`` "call") or returns ("return")."""
    fired = [False]

    def local(frame: FrameType, seen: str, arg: Any) -> Any:
        if seen == "return" and not fired[0]:
            fired[0] = True
            sys.settrace(None)
            raise Alarm(f"the handler ran as {name} returned")
        return local

    def tracer(frame: FrameType, seen: str, arg: Any) -> Any:
        if seen != "call" or frame.f_code.co_name != name or fired[0]:
            return None
        if event == "call":
            fired[0] = True
            sys.settrace(None)
            raise Alarm(f"the handler ran as {name} began")
        return local

    return tracer


@pytest.mark.parametrize("idempotency", ["none", "native"])
def test_an_alarm_as_the_insert_returns_answers_recorded_not_sent(url: str, idempotency: str) -> None:
    sent: Counter[str] = Counter()

    def put(key: str, idempotency_key: str | None = None) -> str:
        sent[key] += 1
        return f"put {key}"

    rt = Runtime(url, recover_on_start=False)
    try:
        rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write", idempotency=idempotency)
        run = rt.new_run()
        rt.call(ToolCall(name="put", arguments={"key": "warm"}), run_id=run, node_id="warm")
        sys.settrace(_alarm_at("_begun", "return"))
        try:
            x = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        finally:
            sys.settrace(None)
        assert sent["x"] == 0
        assert x.error is not None, x
        assert "could not record" not in x.error.message, x.error.message
        assert x.error.category == "transient" and x.error.details.get("sent") is False
        assert "recorded" in x.error.message and "settles" in x.error.message, x.error.message
        store: Any = rt.ledger
        entry = store.entries_of(run, ["x"])["x"]
        assert (entry.state, entry.attempts) == ("dispatched", 1)
        again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        if idempotency == "native":
            assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1)
        else:
            assert again.error is not None and again.error.category == "unknown_commit"
            assert sent["x"] == 0
    finally:
        rt.close()


def test_an_alarm_before_the_insert_still_answers_nothing_recorded(url: str) -> None:
    sent: Counter[str] = Counter()

    def put(key: str) -> str:
        sent[key] += 1
        return f"put {key}"

    rt = Runtime(url, recover_on_start=False)
    try:
        rt.add_tool(name="put", input_schema=SCHEMA, fn=put, effect="write")
        run = rt.new_run()
        rt.call(ToolCall(name="put", arguments={"key": "warm"}), run_id=run, node_id="warm")
        sys.settrace(_alarm_at("_begun", "call"))
        try:
            x = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        finally:
            sys.settrace(None)
        assert x.error is not None and x.error.category == "transient", x
        assert "could not record the intent" in x.error.message and sent["x"] == 0
        store: Any = rt.ledger
        assert "x" not in store.entries_of(run, ["x"])
        again = rt.call(ToolCall(name="put", arguments={"key": "x"}), run_id=run, node_id="x")
        assert (again.status, again.data, sent["x"]) == ("ok", "put x", 1)
    finally:
        rt.close()
