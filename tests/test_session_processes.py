"""A second process continuing a conversation never re-sends an action whose outcome is unknown.

Each step runs in a process of its own (spawned), over one SQLite file or one PostgreSQL schema:
the tool counts what it really sent in a file, whatever the runtimes believe.
"""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import fresh_schema

ARGS = {"to": "+15550100", "text": "running late"}


def _step(store: str, outbox: str, call_id: str, new_turn: bool, out: Any) -> None:
    from actionspace import Runtime

    rt = Runtime(store, recover_on_start=False)

    @rt.tool(effect="external", idempotency="none")
    def send_sms(to: str, text: str) -> str:
        """Send a text message; the carrier's answer gets lost."""
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to, "text": text}) + "\n")
        raise TimeoutError("the carrier did not answer")

    s = rt.session(run_id="conv-7", provider="openai_chat")
    s.user("Text Bob that I'm running late")
    if new_turn:
        s.user("Did it go out? Send it again")
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "send_sms", "arguments": json.dumps(ARGS)},
            }
        ],
    }
    obs = s.handle(message).observations[0]
    out.put(
        (
            obs.error.category if obs.error else "ok",
            (obs.error.details if obs.error else {}).get("idempotency_key"),
        )
    )
    rt.close()


def _run(store: str, outbox: Path, call_id: str, new_turn: bool) -> tuple[str, str | None]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_step, args=(store, str(outbox), call_id, new_turn, out))
    proc.start()
    result: tuple[str, str | None] = out.get(timeout=60)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    return result


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _three_processes(store: str, outbox: Path) -> None:
    first = _run(store, outbox, "call_a", new_turn=False)
    again = _run(store, outbox, "call_b", new_turn=False)  # a restart, the model asks again
    later = _run(store, outbox, "call_c", new_turn=True)  # and once more in a new turn
    assert first[0] == again[0] == later[0] == "unknown_commit"
    assert first[1] is not None and again[1] == later[1] == first[1]
    assert len(outbox.read_text().splitlines()) == 1


def test_a_re_proposal_in_another_process_is_never_sent_sqlite(tmp_path: Path) -> None:
    _three_processes(f"sqlite:///{tmp_path / 'conv.db'}", tmp_path / "outbox.jsonl")


def test_a_re_proposal_in_another_process_is_never_sent_postgres(pg_schema_url: str, tmp_path: Path) -> None:
    _three_processes(pg_schema_url, tmp_path / "outbox.jsonl")
