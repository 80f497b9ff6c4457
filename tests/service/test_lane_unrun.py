"""A background run whose lane stopped before running it (the runner closing while the run was
being submitted) is closed and forgotten: neither it nor the runner's guard around it is left to
the garbage collector as a coroutine never awaited, and waiting on it does not hang."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import inspect
import warnings
from typing import Any

import pytest

from actionspace.service import BackgroundRuns, RunnerConfig
from tests.service.apptools import World, build_runtime

PAY = {"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}


def _recording_runs(runner: BackgroundRuns) -> list[Any]:
    """The coroutines ``runner.start_calls`` makes from now on."""
    made: list[Any] = []
    original = runner._calls

    def calls(*args: Any) -> Any:
        made.append(original(*args))
        return made[-1]

    runner._calls = calls  # type: ignore[method-assign,assignment]
    return made


@pytest.mark.parametrize("turns", [0, 1], ids=["before-its-task-was-made", "before-its-first-step"])
def test_a_run_its_lane_stopped_before_running_is_closed_and_forgotten_without_warnings(turns: int) -> None:
    world = World()
    rt, _ = build_runtime(world)
    runner = BackgroundRuns(rt, RunnerConfig())
    lane = asyncio.new_event_loop()  # a lane whose loop this test turns, stops and closes by hand
    runner._lanes.loop_for = lambda _key: lane  # type: ignore[method-assign,assignment]
    made = _recording_runs(runner)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rt.new_run("unrun")
            runner.start_calls([PAY], run_id="unrun", principal=rt.principal)
            for _ in range(turns):  # the lane makes the run's task, and stops before its first step
                lane.call_soon(lane.stop)
                lane.run_forever()
            lane.close()  # what it had not run yet is dropped
            runner.close(timeout=0.1)  # nothing of the run can end: not waited for
            assert runner.live("unrun") is None
            assert [inspect.getcoroutinestate(c) for c in made] == [inspect.CORO_CLOSED]
            with pytest.raises(concurrent.futures.CancelledError):
                runner.wait("unrun", timeout=10)
            made.clear()
            del runner
            gc.collect()
        never = [str(w.message) for w in caught if "never awaited" in str(w.message)]
        assert never == []
        assert world.payments == []
    finally:
        rt.close()
