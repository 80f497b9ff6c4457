"""On PostgreSQL, an async call reads what other processes saved of its run from a worker
thread, never on its event loop; and a save that only adds to a label (``save_later``) is
written over the revision it holds, not dropped."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.ledger.run_state import PostgresRunStateStore
from tests.pg import fresh_schema


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_an_async_call_reads_the_remote_run_state_off_its_event_loop(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = Runtime(pg_schema_url, recover_on_start=False)

    @rt.tool(effect="read")
    async def look(who: str) -> str:
        return who

    readers: list[threading.Thread] = []
    original = PostgresRunStateStore.rev

    def rev(self: PostgresRunStateStore, run_id: str) -> int | None:
        readers.append(threading.current_thread())
        return original(self, run_id)

    monkeypatch.setattr(PostgresRunStateStore, "rev", rev)
    call = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "look", "arguments": '{"who": "bob"}'}}
        ],
    }

    async def main() -> tuple[threading.Thread, list[Any]]:
        run = rt.new_run()
        out = [await rt.acall(call, run_id=run) for _ in range(3)]
        return threading.current_thread(), out

    try:
        loop_thread, out = asyncio.run(main())
    finally:
        rt.close()
    assert all(o.status == "ok" for o in out), out
    assert readers, "the run's stored revision was never read"
    assert loop_thread not in readers


def test_a_save_later_over_its_own_revision_is_written(pg_schema_url: str) -> None:
    store = PostgresRunStateStore(pg_schema_url)
    try:
        assert store.save("r", {"turn": 1, "rev": 1}) is True
        assert store.save_later("r", {"turn": 1, "rev": 1, "more": True}) is True
        loaded = store.load("r")
        assert loaded is not None and loaded.get("more") is True
        assert store.save("r", {"turn": 2, "rev": 1}) is False  # made over revision 0: another was saved
        assert store.rev("r") == 1
    finally:
        store.close()
