"""A conversation continued by a second Runtime on the same SQLite store (the process restarted
between two steps): what the first process showed the model stays usable in the second."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actionspace import Runtime


def _runtime(tmp_path: Path) -> Runtime:
    rt = Runtime(f"sqlite:///{tmp_path / 'as.db'}", artifacts=tmp_path / "artifacts")

    @rt.tool(effect="read")
    def build_log(lines: int) -> str:
        """The build log."""
        return "".join(f"step {i} ok\n" for i in range(lines)) + "ERROR linker failed\nexit code 1\n"

    return rt


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    entry = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return {"role": "assistant", "content": None, "tool_calls": [entry]}


def _names(tools: Any) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_an_artifact_shown_before_a_restart_is_still_offered_and_readable_after_it(tmp_path: Path) -> None:
    first = _runtime(tmp_path)
    s1 = first.session(run_id="conv-restart", provider="openai_chat")
    s1.user("why did the build fail?")
    shown = s1.handle(_call("c1", "build_log", {"lines": 20_000})).observations[0]
    ref = shown.artifact_ref
    assert ref is not None and "read_artifact" in _names(s1.tools())
    first.engine.forget("conv-restart")

    second = _runtime(tmp_path)  # the process restarted between two steps of the loop
    s2 = second.session(run_id="conv-restart", provider="openai_chat")
    assert "read_artifact" in _names(s2.tools())
    read = s2.handle(_call("c2", "read_artifact", {"ref": ref, "offset": 0, "length": 64})).observations[0]
    assert read.status == "ok", read.error


def test_a_model_reading_an_artifact_right_after_a_restart_is_not_told_the_tool_is_unknown(
    tmp_path: Path,
) -> None:
    first = _runtime(tmp_path)
    s1 = first.session(run_id="conv-restart-2", provider="anthropic")
    s1.user("why did the build fail?")
    s1.tools()
    message = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "build_log", "input": {"lines": 20_000}}],
    }
    ref = s1.handle(message).observations[0].artifact_ref
    assert ref is not None
    s1.tools()  # the model was offered read_artifact with this result
    first.engine.forget("conv-restart-2")

    second = _runtime(tmp_path)
    s2 = second.session(run_id="conv-restart-2", provider="anthropic")
    read_it = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t2", "name": "read_artifact", "input": {"ref": ref}}],
    }
    read = s2.handle(read_it).observations[0]  # the loop kept the tool list it had
    assert read.status == "ok", read.error
