"""The attempt notes of a wave: one round trip to PostgreSQL, and every note found afterwards."""

from __future__ import annotations

import re
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

import pytest
from psycopg import pq

from actionspace.durable.executors import Heartbeat


def _round_trips(trace: str) -> int:
    """Messages the client sent that each wait for the server's answer (simple query, sync)."""
    return len(re.findall(r"^F\t\d+\t(?:Query|Sync)\b", trace, flags=re.MULTILINE))


def test_a_wave_notes_its_attempts_in_one_round_trip_that_later_attempts_find(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    heartbeat = Heartbeat(store, "exec-a", every_s=1.0, dead_after_s=5.0, recover=lambda _: 0)
    heartbeat.open()
    traced = tmp_path / "libpq.trace"
    try:
        attempts = [(f"n{i}", uuid.uuid4().hex) for i in range(6)]
        with traced.open("w") as out, heartbeat._pool.connection() as conn:
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
            with monkeypatch.context() as patch:  # the notes go through this traced connection
                patch.setattr(heartbeat._pool, "connection", lambda *_a, **_k: nullcontext(conn))
                heartbeat.begin_attempts("run-1", attempts)
            conn.pgconn.untrace()
        assert _round_trips(traced.read_text()) == 1
        later = time.time() + 1.0
        for node_id, attempt_id in attempts:
            assert heartbeat.attempt_at("run-1", node_id, later) == ("exec-a", attempt_id)
        assert heartbeat.attempt_at("run-2", "n0", later) is None
        assert heartbeat.attempt_at("run-1", "n0", time.time() - 60) is None  # noted just now
    finally:
        heartbeat.stop(hand_over=False)


def test_noting_no_attempts_writes_nothing(store: str) -> None:
    heartbeat = Heartbeat(store, "exec-b", every_s=1.0, dead_after_s=5.0, recover=lambda _: 0)
    heartbeat.open()
    try:
        heartbeat.begin_attempts("run-1", [])
        assert heartbeat.attempt_at("run-1", "n0", time.time() + 1.0) is None
    finally:
        heartbeat.stop(hand_over=False)
