"""An async tool's first step taken by the engine's driver (pipeline/_drive.py) instead of
``coro.send(None)``: calls end as the path the one-frame function stands in for ends them
(``Messages.quick``), whatever the tool does at its first step — end at once, wait, fail, raise a
``BaseException`` of its own, or call the runtime again while the driver is running it — and
however such calls interleave (gathered, so a driver is handed to a call that waits while others
go on; from several threads at once)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.execution.deadlines import resume_within
from actionspace.pipeline._drive import DONE, driver, handed
from tests.pipeline.test_fast import _view

RUN = "run-driver"
KINDS = ("now", "now", "now", "wait", "fail", "again", "again_waits", "base", "wait_fail")


class Stop(BaseException):
    """A BaseException of the tool's own: its failure, not a cancellation (execution/raised.py)."""


def _entry(name: str, a: int, call_id: str) -> str:
    arguments = json.dumps({"a": a})
    return json.dumps({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})


def _runtime(kinds: list[str], *, direct: bool) -> Runtime:
    """Async ``t0`` doing ``kinds[a]`` at its first step, and ``t1`` (ends at once, or waits first
    for an odd ``a``) that ``t0`` calls on the same run for "again"."""
    rt = Runtime("memory://")

    async def t0(a: int) -> Any:
        kind = kinds[a % len(kinds)]
        if kind.startswith("wait"):
            await asyncio.sleep(0)
        if kind.endswith("fail"):
            raise ValueError(f"bad a={a}")
        if kind == "base":
            raise Stop
        if kind.startswith("again"):
            inner = await rt.acall(_entry("t1", 2 * a + (kind == "again_waits"), f"in_{a}"), run_id=RUN)
            return [a, inner.status, inner.data]
        return a * 3

    async def t1(a: int) -> int:
        if a % 2:
            await asyncio.sleep(0)
        return a + 1000

    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    for name, fn in (("t0", t0), ("t1", t1)):
        rt.add_tool(
            name=name,
            input_schema=schema,
            fn=fn,
            effect="none",
            labels={"confidentiality": "public", "integrity": "trusted"},
        )
    if not direct:
        rt.engine.quick = rt.engine.messages.quick
    return rt


def _played(kinds: list[str], order: list[int], gathered: list[bool], *, direct: bool) -> dict[str, Any]:
    """``order`` called one after another, each group marked in ``gathered`` awaited together."""
    with _runtime(kinds, direct=direct) as rt:
        run_id = rt.new_run(RUN)

        async def play() -> list[Any]:
            out: list[Any] = []
            i = 0
            for together in gathered:
                batch = order[i : i + (3 if together else 1)]
                i += len(batch)
                raws = [_entry("t0", a, f"call_{i}_{j}") for j, a in enumerate(batch)]
                out.extend(await asyncio.gather(*(rt.acall(raw, run_id=run_id) for raw in raws)))
            return out

        observations = asyncio.run(play())
        view = _view(rt, run_id, observations)
        view["data"] = [(o.status, o.data) for o in observations]
        return view


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=6),
    order=st.lists(st.integers(0, 11), min_size=4, max_size=14),
    gathered=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_a_first_step_taken_by_the_driver_ends_every_call_as_the_path_it_replaces(
    kinds: list[str], order: list[int], gathered: list[bool]
) -> None:
    direct = _played(kinds, order, gathered, direct=True)
    assert direct == _played(kinds, order, gathered, direct=False)
    for a, (status, data) in zip(order, direct["data"], strict=False):
        kind = kinds[a % len(kinds)]
        if kind in ("now", "wait"):
            assert (status, data) == ("ok", a * 3)
        elif kind.startswith("again"):
            assert (status, data) == ("ok", [a, "ok", 2 * a + (kind == "again_waits") + 1000])
        else:
            assert status == "error"


def test_calls_from_several_threads_each_get_their_own_value() -> None:
    """Each thread runs its own event loop against one runtime (one engine, one driver at a
    time): a thread finds the driver running only if another holds it, and then steps its tool
    by hand; none sees another's value or a driver that is already executing."""
    kinds = ["now", "again", "wait", "now", "again_waits", "now"]
    errors: list[BaseException] = []
    results: dict[int, list[tuple[int, Any]]] = {}
    with _runtime(kinds, direct=True) as rt:
        rt.new_run(RUN)
        start = threading.Barrier(4)

        def worker(t: int) -> None:
            async def play() -> list[tuple[int, Any]]:
                out = []
                for i in range(150):
                    a = (t * 150 + i) % 60
                    obs = await rt.acall(_entry("t0", a, f"c{t}_{i}"), run_id=RUN)
                    out.append((a, obs.data))
                return out

            try:
                start.wait()
                results[t] = asyncio.run(play())
            except BaseException as exc:  # noted for the assert below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert errors == []
    for out in results.values():
        for a, data in out:
            kind = kinds[a % len(kinds)]
            want = [a, "ok", 2 * a + (kind == "again_waits") + 1000] if kind.startswith("again") else a * 3
            assert data == want
    assert sum(map(len, results.values())) == 600


def test_the_driver_yields_done_with_the_value_and_takes_the_next_coroutine() -> None:
    async def value(x: int) -> int:
        return x * 2

    drive, box, _ = driver()
    for x in (1, 2, 3):
        assert drive.send(value(x)) is DONE
        assert box[0] == x * 2
    assert drive.gi_suspended


def _handed_waiting(body: Callable[[asyncio.Event, list[str]], Any]) -> tuple[Any, list[str]]:
    """A driver handed a coroutine (``body``) that waits at its first step, then driven to its
    end as the executor drives a tool that waited (``resume_within``)."""
    notes: list[str] = []

    async def main() -> Any:
        event = asyncio.Event()
        drive, box, _ = driver()
        yielded = drive.send(body(event, notes))
        assert yielded is not DONE
        handed(box)
        asyncio.get_running_loop().call_soon(event.set)
        return await resume_within(drive, yielded, 60.0)  # type: ignore[arg-type]

    return asyncio.run(main()), notes


def test_a_handed_driver_returns_the_waiting_coroutines_value() -> None:
    async def body(event: asyncio.Event, notes: list[str]) -> int:
        await event.wait()
        notes.append("woke")
        return 41

    value, notes = _handed_waiting(body)
    assert (value, notes) == (41, ["woke"])


def test_a_handed_driver_raises_the_waiting_coroutines_failure() -> None:
    async def body(event: asyncio.Event, notes: list[str]) -> int:
        await event.wait()
        raise ValueError("late")

    with pytest.raises(ValueError, match="late"):
        _handed_waiting(body)


def test_a_handed_driver_forwards_throw_and_close_to_the_coroutine() -> None:
    notes: list[str] = []

    async def body() -> int:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            notes.append("cancelled")
            raise
        finally:
            notes.append("closed")
        return 0

    async def main() -> None:
        drive, box, _ = driver()
        assert drive.send(body()) is not DONE
        handed(box)
        with pytest.raises(asyncio.CancelledError):
            drive.throw(asyncio.CancelledError())

    asyncio.run(main())
    assert notes == ["cancelled", "closed"]

    async def other() -> None:
        notes.clear()
        drive, box, _ = driver()
        assert drive.send(body()) is not DONE
        handed(box)
        drive.close()

    asyncio.run(other())
    assert notes == ["closed"]
