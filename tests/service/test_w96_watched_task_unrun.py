"""A lane's task cancelled before its first step leaves no coroutine unawaited.

Every task a lane makes runs its coroutine inside :func:`watched_task`'s wrapper. A cancel that
lands before the wrapper's first step is thrown in at the wrapper's start, so the coroutine it was
given never began: left to the garbage collector, Python warned "coroutine … was never awaited".
A send of an approved call (``sending_alone``) whose block ended before its renewing task first
ran cancelled that task so, on every lane.
"""

from __future__ import annotations

import asyncio
import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from actionspace.execution.loop import new_event_loop
from actionspace.service._stopped import watched_task
from actionspace.service.continuation import sending_alone
from tests.service.apptools import served


@contextmanager
def unawaited() -> Iterator[list[str]]:
    """The "never awaited" warnings raised while the block runs and at a collection after it."""
    found: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
        gc.collect()
    found.extend(str(w.message) for w in caught if "never awaited" in str(w.message))


def _on_a_lane_loop(main: object) -> object:
    loop = new_event_loop()
    loop.set_task_factory(watched_task)
    try:
        return loop.run_until_complete(main)  # type: ignore[arg-type]
    finally:
        loop.close()


def test_a_watched_task_cancelled_before_its_first_step_closes_the_coroutine_it_was_given() -> None:
    began: list[str] = []

    async def work() -> None:
        began.append("work")
        await asyncio.sleep(10)

    async def main() -> bool:
        task = asyncio.get_running_loop().create_task(work())
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    with unawaited() as found:
        assert _on_a_lane_loop(main()) is True
    assert found == [] and began == []


def test_a_watched_task_that_ran_still_ends_with_what_its_coroutine_gave() -> None:
    async def work() -> int:
        await asyncio.sleep(0)
        return 7

    async def main() -> int:
        return await asyncio.get_running_loop().create_task(work())

    with unawaited() as found:
        assert _on_a_lane_loop(main()) == 7
    assert found == []


def test_a_send_whose_block_ends_before_its_renewal_first_runs_leaves_nothing_unawaited() -> None:
    """The report: an approved call sent alone on a lane, its block over at once."""
    with served() as (_client, rt, _world, _signalling, _app):
        held = rt.call(
            {"name": "send_payment", "arguments": {"to": "a", "amount": 1}}, run_id="r", node_id="n"
        )
        assert held.error is not None
        request = rt.approvals.get(held.error.details["request_id"])
        assert request is not None

        async def main() -> list[str]:
            kinds: list[str] = []
            async with sending_alone(rt, request):
                kinds.append("inside")  # no suspension: the renewal never got its first step
            return kinds

        with unawaited() as found:
            assert _on_a_lane_loop(main()) == ["inside"]
        assert found == []
        marks = [e.data["action"] for e in rt.trace.events("r") if e.data.get("sender")]
        assert marks == ["sending", "sent"]
