"""The worker processes that parse huge raw outputs (service/lanes.py ``PROCESSES``) yield the CPU to
the server, and a huge output none of whose calls runs is read in one worker trip, not two.

Under the load test's adversary (1 MB outputs posted back to back) the parsing workers were busy
on both cores of a 2-core machine at the server's own priority, and every such output went to a
worker twice (once to parse, once more for its call ids): the server's approvals waited behind
them (p95 over 1 s in one CI run).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest

from actionspace.service import BackgroundRuns, RunnerConfig, lanes, outputs
from actionspace.service.lanes import ProcessWork
from tests.service.apptools import World, build_runtime

BIG_UNPARSED = json.dumps(
    {
        "role": "assistant",
        "content": " </s>" * 20_000,
        "tool_calls": [
            {"id": "call_A", "type": "function", "function": {"name": "lookup", "arguments": '{"city": '}},
            {"id": "call_B", "type": "function", "function": {"name": "lookup", "arguments": '{"ci'}},
        ],
    }
)
"""Over the inline size (so it goes to a worker), and none of its calls parses."""


@pytest.mark.skipif(not hasattr(os, "nice"), reason="no process priorities here")
def test_a_parsing_worker_runs_at_a_lower_priority_than_the_server() -> None:
    work = ProcessWork(workers=1)
    try:
        worker_nice = asyncio.run(work.run(os.nice, 0, timeout_s=120))
    finally:
        work.close()
    server_nice = os.nice(0)
    assert worker_nice > server_nice or server_nice == 19
    assert worker_nice == min(19, server_nice + 10)


def test_a_huge_output_without_a_call_to_run_goes_to_a_worker_once(monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(BIG_UNPARSED) > outputs._INLINE_PARSE_CHARS
    trips: list[str] = []

    async def counted(fn: Any, arg: Any, *, timeout_s: float) -> Any:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return fn(arg)  # the work itself, here, as the worker would run it

    monkeypatch.setattr(lanes.PROCESSES, "run", counted)
    rt, _ = build_runtime(World())
    runner = BackgroundRuns(rt, RunnerConfig())
    try:
        rt.new_run("big")
        runner.start_calls([BIG_UNPARSED], run_id="big", principal=rt.principal)
        assert runner.wait("big", timeout=60) == "error"
        events = rt.trace.events("big")
    finally:
        runner.close()
        rt.close()
    assert len(trips) == 1, trips
    observed = [(e.call_id, e.data.get("category")) for e in events if e.kind == "observation"]
    assert observed == [("call_A", "parse_error"), ("call_B", "parse_error")]


def test_work_queued_for_the_workers_holds_none_of_the_threads_small_parses_run_on() -> None:
    """Six outputs queued behind one busy worker (more than the threads :func:`off_loop` has):
    a small parse sent after them still runs at once, while every one of them waits."""

    async def scenario(work: ProcessWork) -> tuple[str, list[bool]]:
        await work.run(time.sleep, 0, timeout_s=120)  # the worker started (spawning takes a while)
        slow = [asyncio.ensure_future(work.run(time.sleep, 1.0, timeout_s=120)) for _ in range(6)]
        await asyncio.sleep(0.2)  # every one of them handed to the pool
        quick = await lanes.off_loop(lambda: "parsed", timeout_s=120)
        pending = [not s.done() for s in slow]
        await asyncio.gather(*slow)
        return quick, pending

    work = ProcessWork(workers=1)
    try:
        quick, pending = asyncio.run(scenario(work))
    finally:
        work.close()
    assert quick == "parsed"
    assert pending == [True] * 6, "the small parse waited for queued worker output"


def test_a_worker_raising_reaches_its_caller_and_a_timeout_replaces_the_workers() -> None:
    work = ProcessWork(workers=1)
    try:
        with pytest.raises(ValueError, match="invalid literal"):
            asyncio.run(work.run(int, "not a number", timeout_s=120))
        with pytest.raises(TimeoutError):
            asyncio.run(work.run(time.sleep, 30, timeout_s=0.5))
        assert asyncio.run(work.run(abs, -3, timeout_s=120)) == 3  # new workers answer
    finally:
        work.close()
