"""Streaming tools: provisional observations, one final observation, failures and bounded memory."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Effect, Observation, Runtime, ToolCall, ToolResult
from actionspace.execution.streaming import StreamPolicy
from actionspace.observation import MemoryArtifactStore
from actionspace.observation.verify import final, no_other_items
from actionspace.validation.verdicts import Accepted, Rejected
from tests.proc import run_child

EVERY_CHUNK = StreamPolicy(every_bytes=0)


def _lines(n: int) -> list[str]:
    return [f"line {i}\n" for i in range(n)]


def _runtime(**kw: Any) -> Runtime:
    rt = Runtime("memory://", **kw)

    @rt.tool(effect="read")
    async def tail(n: int) -> AsyncIterator[str]:
        """Stream n lines."""
        for line in _lines(n):
            yield line

    @rt.tool(effect="read")
    def tail_sync(n: int) -> Iterator[str]:
        """Stream n lines from a sync generator."""
        yield from _lines(n)

    @rt.tool(effect="read")
    async def drops(n: int) -> AsyncIterator[str]:
        """Stream n lines, then lose the connection."""
        for line in _lines(n):
            yield line
        raise ConnectionError("upstream closed the connection")

    return rt


async def _collect(rt: Runtime, call: ToolCall, policy: StreamPolicy = EVERY_CHUNK) -> list[Observation]:
    return [obs async for obs in rt.astream(call, run_id="r1", policy=policy)]


@pytest.mark.parametrize("tool", ["tail", "tail_sync"])
def test_a_stream_yields_provisional_observations_then_exactly_one_final(tool: str) -> None:
    rt = _runtime()
    seen = asyncio.run(_collect(rt, ToolCall(name=tool, arguments={"n": 4})))
    provisional, last = seen[:-1], seen[-1]
    assert len(provisional) == 4
    assert all(o.provisional and not o.complete and o.status == "ok" for o in provisional)
    assert [o.data for o in provisional] == ["".join(_lines(k)) for k in range(1, 5)]
    assert not last.provisional and last.complete and last.status == "ok"
    assert last.data == "".join(_lines(4))


def test_the_final_artifact_holds_the_concatenation_of_every_chunk() -> None:
    rt = _runtime()
    last = asyncio.run(_collect(rt, ToolCall(name="tail", arguments={"n": 50})))[-1]
    assert last.artifact_ref is not None
    assert rt.artifacts.get(last.artifact_ref) == "".join(_lines(50)).encode()


def test_call_and_acall_on_a_streaming_tool_return_only_the_final_observation() -> None:
    rt = _runtime()
    sync = rt.call(ToolCall(name="tail_sync", arguments={"n": 3}), run_id="r1")
    async_ = asyncio.run(rt.acall(ToolCall(name="tail", arguments={"n": 3}), run_id="r1"))
    for obs in (sync, async_):
        assert not obs.provisional and obs.complete
        assert obs.data == "".join(_lines(3))
        assert obs.artifact_ref is not None


def test_provisional_observations_are_traced_as_provisional_and_the_final_as_usual() -> None:
    rt = _runtime()
    asyncio.run(_collect(rt, ToolCall(name="tail", arguments={"n": 3})))
    observed = [e.data for e in rt.trace.events("r1") if e.kind == "observation"]
    assert [bool(d.get("provisional")) for d in observed] == [True, True, True, False]
    assert "artifact_ref" in observed[-1]


def test_a_stream_failing_midway_ends_in_an_error_and_no_artifact_claims_completion() -> None:
    rt = _runtime()
    seen = asyncio.run(_collect(rt, ToolCall(name="drops", arguments={"n": 3})))
    assert [o.provisional for o in seen] == [True, True, True, False]
    last = seen[-1]
    assert last.status == "error" and last.error is not None
    assert last.error.category == "transient"  # ConnectionError on a read, from the exception map
    assert last.error.details["chunks_received"] == 3
    assert last.artifact_ref is None
    assert isinstance(rt.artifacts, MemoryArtifactStore) and len(rt.artifacts) == 0
    assert isinstance(final()(last), Accepted)  # it is final, but it is an error:
    assert isinstance(no_other_items()(last), Rejected)


def test_a_provisional_observation_cannot_support_a_conclusion() -> None:
    rt = _runtime()
    first = asyncio.run(_collect(rt, ToolCall(name="tail", arguments={"n": 2})))[0]
    verdict = final()(first)
    assert isinstance(verdict, Rejected)
    assert verdict.error.details["reason"] == "provisional"


_FIREHOSE = """
import asyncio, json, sys, tracemalloc
from actionspace import Runtime, ToolCall
from actionspace.execution.streaming import StreamPolicy
from actionspace.observation import FolderArtifactStore, canonical_bytes

rt = Runtime("memory://", artifacts=FolderArtifactStore(sys.argv[1]))
chunk, count = "x" * 999 + "\\n", 4000  # 4 MB of output

@rt.tool(effect="read", max_observation_bytes=1024)
async def firehose():
    \"\"\"A long stream.\"\"\"
    for _ in range(count):
        yield chunk

sizes, last = [], None

async def read():
    global last
    call = ToolCall(name="firehose", arguments={})
    async for obs in rt.astream(call, run_id="r1", policy=StreamPolicy(every_bytes=64 * 1024)):
        sizes.append(len(canonical_bytes(obs.data)))
        last = obs

tracemalloc.start()
asyncio.run(read())
_, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
with rt.artifacts.open(last.artifact_ref) as stored:
    size = sum(len(piece) for piece in iter(lambda: stored.read(1 << 20), b""))
print(json.dumps({"peak": peak, "sizes": sizes, "provisional": last.provisional, "complete": last.complete,
                  "trimmed": last.trimming is not None, "stored": size, "output": count * len(chunk)}))
"""


def test_a_long_stream_keeps_shaped_data_and_memory_bounded(tmp_path: Path) -> None:
    # measured in a process of its own: tracemalloc counts every thread's allocations, and a worker
    # of the suite may still run another test's threads
    got = run_child(_FIREHOSE, str(tmp_path))
    assert not got["provisional"]
    assert len(got["sizes"]) > 50
    assert max(got["sizes"]) <= 1024
    assert not got["complete"] and got["trimmed"]
    assert got["peak"] < 2 * 1024 * 1024  # half the output: the stream is never held whole
    assert got["stored"] == got["output"]


def test_a_side_effecting_stream_commits_once_through_the_ledger() -> None:
    rt = _runtime()
    runs: list[int] = []

    @rt.tool(effect="write")
    async def export(n: int) -> AsyncIterator[Any]:
        """Write n rows, streaming progress."""
        runs.append(n)
        for i in range(n):
            yield f"row {i}\n"
        yield ToolResult(effects=(Effect(resource_id="export:1", kind="created"),))

    call = ToolCall(name="export", arguments={"n": 2})
    first = asyncio.run(_collect(rt, call))[-1]
    again = rt.call(call, run_id="r1")  # the same proposal again, in the same turn: one action
    assert first.status == "ok" and first.effects[0].resource_id == "export:1"
    assert [e.state for e in rt.ledger.list()] == ["committed"]
    assert again.diagnostics.get("replayed") is True
    assert runs == [2]


def test_a_reader_that_stops_early_closes_the_tool_generator() -> None:
    rt = _runtime()
    closed = threading.Event()

    @rt.tool(effect="read")
    async def endless() -> AsyncIterator[str]:
        """Never ends by itself."""
        try:
            while True:
                yield "tick\n"
        finally:
            closed.set()

    async def read_two() -> None:
        stream = rt.astream(ToolCall(name="endless", arguments={}), run_id="r1", policy=EVERY_CHUNK)
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 2:
                break
        await stream.aclose()

    asyncio.run(read_two())
    assert closed.is_set()
    cancelled = [e for e in rt.trace.events("r1") if e.data.get("category") == "cancelled"]
    assert len(cancelled) == 1


def test_a_stream_that_goes_silent_past_its_timeout_fails_as_transient() -> None:
    rt = _runtime()
    never = asyncio.Event()

    @rt.tool(effect="read", timeout_s=0.05)
    async def stalls() -> AsyncIterator[str]:
        """Sends one line, then waits forever."""
        yield "hello\n"
        await never.wait()
        yield "never\n"

    last = asyncio.run(rt.acall(ToolCall(name="stalls", arguments={}), run_id="r1"))
    assert last.error is not None and last.error.category == "transient"
    assert last.error.details["chunks_received"] == 1


def test_a_yielded_tool_result_sets_the_final_envelope() -> None:
    rt = _runtime()

    @rt.tool(effect="read")
    def partial_rows() -> Iterator[Any]:
        """Some rows, then a note that the source had more."""
        yield {"id": 1}
        yield {"id": 2}
        yield ToolResult(complete=False, resource_version="v7")

    obs = rt.call(ToolCall(name="partial_rows", arguments={}), run_id="r1")
    assert obs.status == "ok" and not obs.complete
    assert obs.provenance.resource_version == "v7"
    assert obs.artifact_ref is not None
    assert rt.artifacts.get(obs.artifact_ref) == b'{"id":1}\n{"id":2}\n'
