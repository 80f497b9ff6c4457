"""``trace replay`` of a call made on a tool version since dropped from the catalog: not replayable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from actionspace import Runtime
from actionspace.trace.cli import trace_app
from actionspace.trace.replay import render_text, replay_events


def _lookup(q: str) -> str:
    """Look a word up."""
    return f"found {q}"


def _runtime(store: str = "memory://", *, dropped: bool = False) -> Runtime:
    rt = Runtime(store, recover_on_start=False)
    rt.tool(name="lookup", version="1", effect="read")(_lookup)
    rt.tool(name="other", version="1", effect="read")(_lookup)
    if dropped:  # as an MCP server's churn does: a newer definition, the old one retired and dropped
        rt.tool(name="lookup", version="2", effect="read")(_lookup)
        rt.catalog.retire("lookup@1")
        rt.catalog.drop("lookup@1")
    return rt


def fresh_runtime() -> Runtime:
    """The factory the CLI test loads: version 1 of ``lookup`` dropped."""
    return _runtime(dropped=True)


def _output() -> dict[str, Any]:
    calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps({"q": "a"})}}
        for cid, name in (("c1", "lookup"), ("c2", "other"))
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def test_a_call_on_a_dropped_version_is_not_replayable_and_the_other_calls_are_replayed() -> None:
    rt = _runtime()
    observations = rt.call_all(_output(), run_id="conv-dropped")
    assert all(o.ok for o in observations)
    result = replay_events("conv-dropped", rt.trace.events("conv-dropped"), _runtime(dropped=True))
    first = [d for d in result.decisions if d.call_id == "c1"]
    assert {d.stage for d in first} >= {"resolve", "authorize", "validate"}
    assert all(not d.replayable for d in first)
    resolve = next(d for d in first if d.stage == "resolve")
    assert "lookup@1" in resolve.replayed and "no longer in the catalog" in resolve.replayed
    assert result.differences == []
    second = [d for d in result.decisions if d.call_id == "c2"]
    assert second and all(d.replayable and d.same for d in second)
    assert "? " in render_text(result) and "0 differ" in render_text(result)


def test_a_tool_whose_every_version_is_gone_still_differs_as_unknown_tool() -> None:
    rt = _runtime()
    rt.call_all(_output(), run_id="conv-gone")
    fresh = Runtime("memory://")
    fresh.tool(name="other", version="1", effect="read")(_lookup)
    result = replay_events("conv-gone", rt.trace.events("conv-gone"), fresh)
    differs = [(d.call_id, d.stage, d.replayed) for d in result.differences]
    assert differs == [("c1", "resolve", "error:unknown_tool")]


def test_the_cli_replays_a_run_with_a_dropped_version_and_reports_it(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'trace.db'}"
    rt = _runtime(store)
    rt.call_all(_output(), run_id="conv-cli")
    rt.close()
    args = ["replay", "conv-cli", "--store", store, "--runtime", f"{__name__}:fresh_runtime"]
    shown = CliRunner().invoke(trace_app, args)
    assert shown.exit_code == 0, shown.output
    assert "? " in shown.output and "lookup@1" in shown.output
    strict = CliRunner().invoke(trace_app, [*args, "--strict", "--json"])
    assert strict.exit_code == 1
    report = json.loads(strict.stdout)
    assert report["differences"] == 0 and report["unreplayed"] >= 3
