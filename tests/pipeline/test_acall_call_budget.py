"""A simple ``rt.acall`` of an async tool on the memory store stays a short chain of Python calls.

Most of what such a call costs is the interpreter entering and leaving functions, so their number
is what is held here (load-independent, unlike a timing). What is decided per (run, tool) stays
decided: the output label's tags, whether the schema alone refuses a non-finite number, a label
whose call ids are at their cap, whether the stores are in memory; a new result's digest is kept
without a helper's call. Before: 29 calls a call, then 23; 12 once the call runs in one sync
function below ``Runtime.acall`` while its tool does not wait (no coroutine of the engine's own),
its record handed to the memory store without the flush's chain, its ``int`` result put in its
envelope without the generic shaping and its arguments checked by the compiled schema alone; 7
once the commonest case (the JSON text of one entry, an async tool, the stores in memory) is
written out in one frame (pipeline/_direct.py) instead of the parse, take, begin and tail (6 of
the package's own); 2 (``Runtime.acall`` and that frame) once the flow state's record, the run's
mark, the crash point's check and the memory store's append are written out in that frame too.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import sys
from collections import Counter
from types import FrameType
from typing import Any

from actionspace import Runtime

PACKAGE_DIR = "/actionspace/"
BUDGET = 3
"""Python-level calls into ``actionspace`` per call: 2 when this was written; 3 since the engine's
driver takes the tool's first step (a generator resumed per call, pipeline/_drive.py: fewer
instructions than the ``StopIteration`` it saves, see the last test)."""
COROUTINES = 1
"""Coroutines of ``actionspace`` entered per call of a tool that does not wait: ``Runtime.acall``."""
FOREIGN = 39
"""Built-in and extension calls made from ``actionspace``'s frames per call (the third test): 48
before plain arguments were taken unasked and the entry read by subscripts, 43 after; still 43
once the name is not stripped (a resolved name has no space around it) and the pending label is
deleted without ``pop`` while the engine's driver is taken and given back (``list.pop`` and
``append``); room for one. 40 once the memory store's record of the call goes in without the
store's lock while the run has a next number (its ``acquire``, ``release`` and ``dict.get`` gone);
room for one. 38 once the observation and its provenance are made as plain instances given their
classes instead of by ``object.__new__`` (the third test checks that none of those calls is left);
room for one."""
RESOLUTIONS = 0
"""Reads of the run's resolutions per call (the last test): 1 (``run.resolved.get``, with the
entry's validity read whole on every call) before the one-frame path checked an entry whole once
per value of ``actionspace._epoch.EPOCH``, 0 after."""
RAISED = 0
"""Exceptions raised by built-in and extension calls from ``actionspace``'s frames per call (the
last test): 1 (the ``StopIteration`` of the tool's first step) before the engine's driver took
that step (pipeline/_drive.py), 0 after."""


def _calls_of(
    n: int, first: int, *, coroutines: bool = False, foreign: bool = False, raised: bool = False
) -> tuple[Counter[str], list[Any]]:
    """Python-level calls into actionspace during ``n`` calls (after warming the run), by function,
    and the observations. Results start at ``first``: each is a value no other call shaped, so its
    digest is computed anew whatever ran before in the process. With ``foreign``: the calls of
    built-in and extension functions made from actionspace's own frames instead, by callee; with
    ``raised``: those of them that raised."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def raw(i: int) -> str:
        arguments = json.dumps({"a": first + i, "b": 1})
        return json.dumps(
            {"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": arguments}}
        )

    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if raised:
            if event == "c_exception" and PACKAGE_DIR in code.co_filename:
                calls[getattr(arg, "__qualname__", type(arg).__name__)] += 1
            return
        if foreign:
            if event == "c_call" and PACKAGE_DIR in code.co_filename:
                calls[getattr(arg, "__qualname__", type(arg).__name__)] += 1
            return
        wanted = not coroutines or code.co_flags & inspect.CO_COROUTINE
        if event == "call" and wanted and PACKAGE_DIR in code.co_filename:
            calls[code.co_qualname] += 1

    async def play() -> list[Any]:
        for i in range(40):  # the name resolved, the entry built, the label's call ids at their cap
            await rt.acall(raw(i))
        out = []
        gc.collect()  # finalizers of earlier tests' objects run now, not counted as this call's
        sys.setprofile(profile)
        try:
            for i in range(40, 40 + n):
                out.append(await rt.acall(raw(i)))
        finally:
            sys.setprofile(None)
        return out

    with rt:
        observations = asyncio.run(play())
    return calls, observations


def test_a_simple_async_call_makes_a_short_chain_of_python_calls() -> None:
    small, first = _calls_of(50, 7_000_000_000)
    large, second = _calls_of(250, 8_000_000_000)
    assert [o.data for o in first] == [7_000_000_000 + i + 1 for i in range(40, 90)]
    assert [o.data for o in second] == [8_000_000_000 + i + 1 for i in range(40, 290)]
    per_call = (sum(large.values()) - sum(small.values())) / 200
    assert per_call <= BUDGET, (per_call, (large - small).most_common())


def test_a_simple_async_call_whose_tool_does_not_wait_enters_one_coroutine_of_ours() -> None:
    """A coroutine of ours is an object and a frame per call, resumed by each layer above it:
    only ``Runtime.acall`` (the API) is one while the tool does not wait. (A ``call`` event is
    also seen each time a coroutine resumes, so a coroutine that waited would count more.)"""
    small, _ = _calls_of(50, 9_000_000_000, coroutines=True)
    large, _ = _calls_of(250, 9_500_000_000, coroutines=True)
    per_call = (sum(large.values()) - sum(small.values())) / 200
    assert per_call <= COROUTINES, (per_call, (large - small).most_common())


def test_plain_arguments_of_a_simple_async_call_are_not_handed_to_the_compiled_schema() -> None:
    """The entry and its arguments are read by subscripts, and arguments that are exactly the
    names of a flat schema, each of exactly its type (``Entry.plain``), are taken without asking
    the compiled schema (a foreign call of some two thousand instructions, then a scan of the
    values' types for a float): built-in and extension calls from the package's frames, per call."""
    small, first = _calls_of(50, 10_000_000_000, foreign=True)
    large, _ = _calls_of(250, 10_500_000_000, foreign=True)
    assert [o.data for o in first] == [10_000_000_000 + i + 1 for i in range(40, 90)]
    grown = large - small
    per_call = sum(grown.values()) / 200
    assert not [name for name in grown if name.endswith("is_valid")], grown.most_common()
    assert not [name for name in grown if name.endswith("__new__")], grown.most_common()
    assert per_call <= FOREIGN, (per_call, grown.most_common())


def test_the_first_step_of_a_tool_that_does_not_wait_raises_nothing() -> None:
    """A coroutine that returns at its first ``send`` raises ``StopIteration``: an exception made
    from its value, a traceback entry and a frame object for the calling frame, each call. The
    engine's driver (pipeline/_drive.py) receives the value through ``yield from`` instead, so no
    built-in or extension call from the package's frames raises on a simple call."""
    small, first = _calls_of(50, 11_000_000_000, raised=True)
    large, _ = _calls_of(250, 11_500_000_000, raised=True)
    assert [o.data for o in first] == [11_000_000_000 + i + 1 for i in range(40, 90)]
    grown = large - small
    per_call = sum(grown.values()) / 200
    assert per_call <= RAISED, (per_call, grown.most_common())


class _CountedReads(dict[str, Any]):
    """A run's resolutions that count their reads."""

    reads = 0

    def get(self, key: str, default: Any = None) -> Any:
        self.reads += 1
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads += 1
        return super().__getitem__(key)


def test_a_simple_async_call_reads_its_entry_without_the_runs_resolutions() -> None:
    """The entry's validity is decided by what moves ``actionspace._epoch.EPOCH`` (the catalog,
    the run's offer, the engine's stages): while the counter stands where the entry was last
    checked whole, the run's resolution of the name is not looked up again on each call."""
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def raw(i: int) -> str:
        arguments = json.dumps({"a": i, "b": 1})
        return json.dumps(
            {"id": f"call_{i}", "type": "function", "function": {"name": "add", "arguments": arguments}}
        )

    with rt:
        run_id = rt.new_run("run-budget")
        state = rt.engine.run(run_id)

        async def play() -> list[Any]:
            for i in range(10):  # the name resolved, the entry built and checked
                await rt.acall(raw(i), run_id=run_id)
            counted = _CountedReads(state.resolved)
            state.resolved = counted
            out = [await rt.acall(raw(i), run_id=run_id) for i in range(10, 110)]
            assert counted.reads / 100 <= RESOLUTIONS, counted.reads
            return out

        observations = asyncio.run(play())
    assert [o.data for o in observations] == [i + 1 for i in range(10, 110)]
