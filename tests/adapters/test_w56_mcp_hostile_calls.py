"""Calls to a hostile stdio server: every misbehaviour ends as a typed error (or a bounded result)
on time, a write is never re-sent, and the server keeps serving what it still can."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Runtime
from actionspace.adapters.mcp_client import McpToolset
from tests.adapters.test_w56_mcp_start_and_shutdown import hostile_stdio, program_children


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes.txt"


@pytest.fixture
def served(notes: Path) -> Iterator[tuple[Runtime, McpToolset]]:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        server = hostile_stdio("normal", allowlisted=True, timeout_s=20.0, env={"W56_NOTES": str(notes)})
        yield rt, rt.add_mcp_server(server)
    finally:
        rt.close()
        for pid, _ in program_children():
            os.kill(pid, 9)


def test_a_100_mb_text_result_ends_at_once_as_a_typed_error_and_the_server_keeps_serving(
    served: tuple[Runtime, McpToolset],
) -> None:
    rt, _ = served
    started = time.monotonic()
    obs = rt.call({"name": "huge", "arguments": {"mb": 100}}, run_id=rt.new_run())
    assert time.monotonic() - started < 15.0  # well within the 20 s timeout, and never retried
    assert obs.error is not None
    assert obs.error.category == "permanent", obs.error
    assert obs.error.details["error"] == "result_too_large"
    started = time.monotonic()
    after = rt.call({"name": "is_error", "arguments": {}}, run_id=rt.new_run())
    assert time.monotonic() - started < 5.0
    assert after.error is not None and after.error.message == "no such city"


def test_a_large_result_within_the_bound_is_kept_whole_as_an_artifact_and_trimmed_for_the_model(
    served: tuple[Runtime, McpToolset],
) -> None:
    rt, _ = served
    obs = rt.call({"name": "huge", "arguments": {"mb": 8}}, run_id=rt.new_run())
    assert obs.status == "ok", obs.error
    assert obs.complete is False and obs.artifact_ref is not None
    assert len(str(obs.to_dict())) < 100_000


def test_a_write_whose_server_dies_mid_call_is_unknown_commit_and_sent_once(
    served: tuple[Runtime, McpToolset], notes: Path
) -> None:
    rt, _ = served
    run = rt.new_run()
    obs = rt.call({"name": "die_write", "arguments": {}}, run_id=run)
    assert obs.error is not None and obs.error.category == "unknown_commit", obs.error
    again = rt.call({"name": "die_write", "arguments": {}}, run_id=run)
    assert again.error is not None and again.error.category == "unknown_commit"
    assert notes.read_text().split() == ["written"]


def test_garbage_lines_on_stdout_are_skipped_and_the_answer_after_them_arrives(
    served: tuple[Runtime, McpToolset],
) -> None:
    rt, _ = served
    obs = rt.call({"name": "garbage", "arguments": {}}, run_id=rt.new_run())
    assert obs.status == "ok", obs.error
    assert obs.data == "clean"


def test_an_answer_for_another_request_id_never_passes_for_this_calls_answer(
    notes: Path,
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    try:
        server = hostile_stdio("normal", allowlisted=True, timeout_s=2.0, env={"W56_NOTES": str(notes)})
        rt.add_mcp_server(server)
        started = time.monotonic()
        obs = rt.call({"name": "wrong_id_write", "arguments": {}}, run_id=rt.new_run())
        assert time.monotonic() - started < 6.0
        assert obs.error is not None and obs.error.category == "unknown_commit", obs.error
    finally:
        rt.close()
