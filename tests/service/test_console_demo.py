"""The demo's held follow-up, the call a person approves in the console after ``actionspace demo``.

The whole path (demo, then serve, then approve in the browser) runs in test_console_browser.py.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from actionspace import Principal, Runtime
from actionspace.demo.followup import (
    RECIPIENT,
    TOOL,
    PartnerChannel,
    channel_path,
    leave_pending,
    with_note,
)

EVENT = {"id": "evt-1", "title": "Design review", "start_utc": "2026-12-08T07:30:00Z"}
WHO = Principal(id="u-lin", scopes=("read:*",))


def test_the_follow_up_is_held_because_the_model_guessed_the_recipient(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    held = leave_pending(store, after_run="run_a", event=EVENT, principal=WHO)
    assert held is not None and held.category == "needs_approval" and held.request_id is not None
    assert held.run_id == "run_a-followup"
    rt = Runtime(store, recover_on_start=False)
    try:
        [request] = rt.approvals.list("pending")
    finally:
        rt.close()
    assert request.id == held.request_id and request.tool == f"{TOOL}@1"
    assert request.arguments["recipient"] == RECIPIENT
    assert request.provenance["recipient"] == "model_inferred"
    assert request.provenance["event_id"].startswith("tool_result:")
    assert list(request.effects) == [f"partner:{RECIPIENT}"]
    channel = PartnerChannel(channel_path(store))
    try:
        assert channel.posts() == []  # nothing leaves before a person decides
    finally:
        channel.close()
    assert channel_path(store).parent.samefile(tmp_path)  # beside the store


def test_the_demo_output_names_the_held_request_and_the_serve_command(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'store.db'}"
    held = leave_pending(store, after_run="run_b", event=EVENT, principal=WHO)
    console = Console(width=400, record=True)
    console.print(with_note("report", held))
    text = console.export_text()
    assert held is not None and held.request_id is not None
    assert held.request_id in text and f"actionspace serve --store {store}" in text
    assert with_note("report", None) == "report"


def test_nothing_is_left_pending_on_a_memory_store_or_without_an_event() -> None:
    assert leave_pending("memory://", after_run="run_x", event=EVENT, principal=WHO) is None
    assert leave_pending("sqlite:///unused.db", after_run="run_x", event=None, principal=WHO) is None
