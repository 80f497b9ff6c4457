"""A streaming tool that raises a ``BaseException`` of its own midway fails its call with a typed error.

A plain tool that raises such an exception already ends as an ``unclassified`` failure, its write
settled ``failed`` in the ledger (tests/execution/test_w4_hostile_tool_exceptions.py). A generator
tool raising the same after its first chunk escaped to the caller of ``Runtime.call``, ``acall``
and ``astream`` instead, and a write's ledger entry was left as the raise found it. What the
process itself is told to do (``KeyboardInterrupt``, ``SystemExit``) still goes on up.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator

import pytest

from actionspace import Runtime
from actionspace.types import Observation


class Hostile(BaseException):
    """Not an Exception: what ``except Exception`` does not catch."""


def _sync_stream(sent: list[str], raising: type[BaseException]) -> Callable[..., Iterator[str]]:
    def stream(q: str) -> Iterator[str]:
        sent.append(q)
        yield "first chunk "
        raise raising("the stream gave up")

    return stream


def _async_stream(sent: list[str], raising: type[BaseException]) -> Callable[..., AsyncIterator[str]]:
    async def stream(q: str) -> AsyncIterator[str]:
        sent.append(q)
        yield "first chunk "
        raise raising("the stream gave up")  # in the step that asked for the next chunk, at once

    return stream


def _async_waiting(sent: list[str], raising: type[BaseException]) -> Callable[..., AsyncIterator[str]]:
    async def stream(q: str) -> AsyncIterator[str]:
        sent.append(q)
        yield "first chunk "
        await asyncio.sleep(0)
        raise raising("the stream gave up")

    return stream


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
KINDS = {
    "sync_blocking": (_sync_stream, {"blocking": True}),
    "sync_inline": (_sync_stream, {"blocking": False}),
    "async_at_once": (_async_stream, {}),
    "async_after_a_wait": (_async_waiting, {}),
}


def _runtime(kind: str, effect: str, sent: list[str], raising: type[BaseException] = Hostile) -> Runtime:
    make, options = KINDS[kind]
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="s", input_schema=SCHEMA, fn=make(sent, raising), effect=effect, **options)
    return rt


def _final(rt: Runtime, caller: str, node: str) -> Observation:
    raw = {"name": "s", "arguments": {"q": node}}
    if caller == "call":
        return rt.call(raw, run_id="hostile", node_id=node)
    if caller == "acall":
        return asyncio.run(rt.acall(raw, run_id="hostile", node_id=node))

    async def streamed() -> Observation:
        seen = [obs async for obs in rt.astream(raw, run_id="hostile", node_id=node)]
        assert all(o.provisional for o in seen[:-1]) and not seen[-1].provisional
        return seen[-1]

    return asyncio.run(streamed())


@pytest.mark.parametrize("caller", ["call", "acall", "astream"])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("effect", ["read", "write"])
def test_a_streams_own_base_exception_is_a_typed_failure_and_settles_its_write(
    kind: str, effect: str, caller: str
) -> None:
    sent: list[str] = []
    with _runtime(kind, effect, sent) as rt:
        obs = _final(rt, caller, "n1")
        assert obs.status == "error" and not obs.provisional
        assert obs.error is not None and obs.error.category == "unclassified", obs.error
        assert obs.error.vendor_code == "Hostile"
        assert obs.error.details.get("chunks_received") == 1
        if effect == "write":
            entry = rt.ledger.get_node("hostile", "n1")
            assert entry is not None and entry.state == "failed", entry
            again = _final(rt, caller, "n1")  # answered from the ledger: never sent twice
            assert again.error is not None and again.error.category == "unclassified"
            assert sent == ["n1"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_system_exit_from_a_stream_still_stops_its_reader(kind: str) -> None:
    sent: list[str] = []
    rt = _runtime(kind, "read", sent, raising=SystemExit)
    try:
        with pytest.raises(SystemExit):
            _final(rt, "astream", "n1")
    finally:
        rt.close()
    assert sent == ["n1"]
