"""A run continued after a gateway restart is pinned to the upstream tool it was shown, whole: a
change of its description, title, schemas or annotations made while the gateway was down is
``version_mismatch``, as a changed version is, although the version label starts over at "1"."""

from __future__ import annotations

import json
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from actionspace import Runtime
from actionspace.adapters._gateway_config import UpstreamConfig, load_config
from actionspace.adapters.mcp_gateway import RUN_META, Gateway
from tests.adapters.gateway_sample_tools import DB_ENV
from tests.adapters.gateway_support import error_of, run_of, store_url, write_config

_SERVER = """
import json, sys
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

shown = json.loads(open(sys.argv[1], encoding="utf-8").read())
server = MCPServer("drift")


def note(text: str) -> str:
    return text


def wide_note(text: str, tag: str = "") -> str:
    return text + tag


server.add_tool(
    wide_note if shown.get("wide") else note,
    name="note",
    title=shown.get("title"),
    description=shown.get("description", ""),
    annotations=ToolAnnotations(**shown.get("annotations", {"read_only_hint": True})),
    structured_output=shown.get("structured", False),
)
server.run("stdio")
"""

_FIRST: dict[str, Any] = {
    "description": "Return the note. A",
    "annotations": {"read_only_hint": True, "open_world_hint": False},
}


def _gateway(tmp_path: Path, shown: dict[str, Any]) -> Gateway:
    """A gateway on a durable store whose upstream lists ``note`` as ``shown`` describes it."""
    (tmp_path / "shown.json").write_text(json.dumps(shown), encoding="utf-8")
    script = tmp_path / "drift_server.py"
    script.write_text(_SERVER, encoding="utf-8")
    upstream = UpstreamConfig(
        name="drift", command=(sys.executable, str(script), str(tmp_path / "shown.json")), allowlisted=True
    )
    config = replace(load_config(write_config(tmp_path)), upstreams=(upstream,))
    gateway = Gateway(config, runtime=Runtime(store_url(tmp_path), recover_on_start=False))
    gateway.open_upstreams()
    return gateway


def _stop(gateway: Gateway) -> None:
    gateway.close()
    gateway.runtime.close()


def _offered_run(tmp_path: Path, shown: dict[str, Any]) -> str:
    """Open a run on a gateway whose upstream shows ``shown``, list (offer) it, stop the gateway."""
    before = _gateway(tmp_path, shown)
    try:
        alice = before.config.principal_by_id("alice")
        assert alice is not None
        listed = anyio.run(before.serve_list, alice, "s1", None)
        assert "drift_note" in {t.name for t in listed.tools}
        ok = anyio.run(before.serve_call, alice, "s1", "drift_note", {"text": "hi"}, None)
        assert not ok.is_error, ok
        return run_of(listed)
    finally:
        _stop(before)


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({**_FIRST, "description": "Return the note. B"}, id="description"),
        pytest.param({**_FIRST, "description": "", "title": "Note B"}, id="title-standing-for-description"),
        pytest.param({**_FIRST, "structured": True}, id="output-schema"),
        pytest.param(
            {**_FIRST, "annotations": {"read_only_hint": True, "open_world_hint": True}}, id="annotations"
        ),
    ],
)
def test_w19_a_tool_changed_while_the_gateway_was_down_is_a_version_mismatch_for_the_continued_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: dict[str, Any]
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    first = {**_FIRST, "description": "", "title": "Note A"} if "title" in changed else _FIRST
    run_id = _offered_run(tmp_path, first)
    after = _gateway(tmp_path, changed)  # restarted: the changed tool is numbered "1" again
    try:
        alice = after.config.principal_by_id("alice")
        assert alice is not None
        assert after.runtime.catalog.current("drift_note").version == "1"  # type: ignore[union-attr]
        stale = anyio.run(after.serve_call, alice, "s2", "drift_note", {"text": "hi"}, {RUN_META: run_id})
        assert run_of(stale) == run_id
        error = error_of(stale)
        assert error["category"] == "version_mismatch", error
        assert error["recovery"] == ["reread_definition", "rebuild_arguments"]
        details = error["details"]
        assert details["offered"] == "drift_note@1"
        # the input schema did not change: the schema hash is the same, the definition is not
        assert details["offered_schema_hash"] == details["current"]["schema_hash"]
        assert details["offered_definition_hash"] != details["current_definition_hash"]
        if "B" in str(changed):
            assert "B" in details["current"]["description"]
        # as for a changed version: the mismatch re-pins, the next call is served by the current tool
        fresh = anyio.run(after.serve_call, alice, "s2", "drift_note", {"text": "hi"}, None)
        assert not fresh.is_error, fresh
    finally:
        _stop(after)


def test_w19_an_unchanged_tool_is_served_to_the_continued_run_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    run_id = _offered_run(tmp_path, _FIRST)
    after = _gateway(tmp_path, _FIRST)
    try:
        alice = after.config.principal_by_id("alice")
        assert alice is not None
        again = anyio.run(after.serve_call, alice, "s2", "drift_note", {"text": "hi"}, {RUN_META: run_id})
        assert not again.is_error, again
        assert run_of(again) == run_id
    finally:
        _stop(after)


def _to_earlier_form(tmp_path: Path, run_id: str) -> None:
    """Rewrite the run's stored pins as the earlier version wrote them: [version, schema hash]."""
    with sqlite3.connect(tmp_path / "gateway.db") as db:
        (text,) = db.execute("SELECT state FROM run_state WHERE run_id = ?", (run_id,)).fetchone()
        state = json.loads(text)
        assert all(len(pin) == 3 for pin in state["pins"].values())
        state["pins"] = {name: pin[:2] for name, pin in state["pins"].items()}
        db.execute("UPDATE run_state SET state = ? WHERE run_id = ?", (json.dumps(state), run_id))


def _continue(tmp_path: Path, run_id: str, shown: dict[str, Any], session: str) -> Any:
    gateway = _gateway(tmp_path, shown)
    try:
        alice = gateway.config.principal_by_id("alice")
        assert alice is not None
        meta = {RUN_META: run_id}
        return anyio.run(gateway.serve_call, alice, session, "drift_note", {"text": "hi"}, meta)
    finally:
        _stop(gateway)


def test_w19_a_run_stored_with_two_element_pins_is_judged_by_version_and_schema_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    run_id = _offered_run(tmp_path, _FIRST)
    _to_earlier_form(tmp_path, run_id)
    # a changed input schema is what the earlier pin saw: still refused, nothing crashes
    stale = _continue(tmp_path, run_id, {**_FIRST, "wide": True}, "s2")
    error = error_of(stale)
    assert error["category"] == "version_mismatch", error
    assert error["recovery"] == ["reread_definition", "rebuild_arguments"]
    assert "offered_definition_hash" not in error["details"]  # the earlier pin did not hold one
    assert error["details"]["offered_schema_hash"] != error["details"]["current"]["schema_hash"]


def test_w19_a_two_element_pin_accepts_what_it_could_not_see_then_is_kept_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    run_id = _offered_run(tmp_path, _FIRST)
    _to_earlier_form(tmp_path, run_id)
    second = {**_FIRST, "description": "Return the note. B"}
    # the earlier pin never held the description: judged as before (same version, same schema)
    same = _continue(tmp_path, run_id, second, "s2")
    assert not same.is_error, same
    # from then on the run's pin covers the definition it was served: another change is refused
    changed = _continue(tmp_path, run_id, {**_FIRST, "description": "Return the note. C"}, "s3")
    error = error_of(changed)
    assert error["category"] == "version_mismatch", error
    assert "C" in error["details"]["current"]["description"]
