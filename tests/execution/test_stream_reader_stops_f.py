"""A side-effecting stream whose reader stops midway: its entry is left ``unknown`` and noted as
abandoned, so the same action proposed again is answered at once (never sent again), not after
waiting for a holder that is gone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from actionspace import Runtime, ToolCall
from actionspace.execution.streaming import StreamPolicy

CALL = ToolCall(name="deploy", arguments={"n": 5})


def test_a_write_stream_its_reader_left_is_unknown_commit_at_once_and_never_sent_again() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    sends: list[int] = []

    @rt.tool(effect="write")
    async def deploy(n: int) -> AsyncIterator[str]:
        """Roll out n hosts, one line per host."""
        sends.append(n)
        for i in range(n):
            yield f"host {i} done\n"
            await asyncio.sleep(0)

    async def read_one_then_leave() -> None:
        stream = rt.astream(CALL, run_id="r1", node_id="n1", policy=StreamPolicy(every_bytes=0))
        async for obs in stream:
            assert obs.provisional
            break
        await stream.aclose()

    with rt:
        asyncio.run(read_one_then_leave())
        entry = rt.ledger.get_node("r1", "n1")
        assert entry is not None and entry.state == "unknown"
        started = time.monotonic()
        again = rt.call(CALL, run_id="r1", node_id="n1")
        took = time.monotonic() - started
    assert again.error is not None and again.error.category == "unknown_commit"
    assert took < 5  # answered, not held until the wait for another caller runs out
    assert sends == [5]
