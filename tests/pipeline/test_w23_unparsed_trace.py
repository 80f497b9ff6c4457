"""A message none of whose calls runs is traced under every call id the runtime answers it under:
``call_all``, ``acall_all`` and ``astream`` alike, so a run's summary counts one call (and one
error) per answered call id, as the model was told."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from actionspace.trace.events import summarize

CUT = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ping", "arguments": '{"host": "a'}},
        {"id": "c2", "type": "function", "function": {"name": "ping", "arguments": '{"ho'}},
    ],
}


def _runtime() -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none")
    def ping(host: str) -> str:
        """Send one ping."""
        sent.append(host)
        return "pong"

    return rt, sent


async def _streamed(rt: Runtime, raw: Any) -> list[Any]:
    return [obs async for obs in rt.astream(raw, run_id="r")]


@pytest.mark.parametrize("how", ["call_all", "acall_all", "astream"])
def test_every_answered_call_id_has_its_observation_event(how: str) -> None:
    rt, sent = _runtime()
    if how == "call_all":
        out = rt.call_all(CUT, run_id="r")
    elif how == "acall_all":
        out = asyncio.run(rt.acall_all(CUT, run_id="r"))
    else:
        out = asyncio.run(_streamed(rt, CUT))
    events = rt.trace.events("r")
    rt.close()
    assert sent == [] and [o.call_id for o in out] == ["c1", "c2"]
    observed = [
        (e.call_id, e.data["category"], e.data["recovery"]) for e in events if e.kind == "observation"
    ]
    assert observed == [("c1", "parse_error", ["re_emit_call"]), ("c2", "parse_error", ["re_emit_call"])]
    summary = summarize("r", events)
    assert summary is not None and (summary.calls, summary.errors) == (len(out), len(out))


def test_output_without_call_ids_is_traced_under_the_run_parse_id_it_is_answered_under() -> None:
    rt, _ = _runtime()
    (obs,) = rt.call_all("I would rather not call a tool.", run_id="r")
    observed = [e for e in rt.trace.events("r") if e.kind == "observation"]
    rt.close()
    assert obs.call_id == "r:parse" and [e.call_id for e in observed] == ["r:parse"]
    assert obs.error is not None and observed[0].data["message"] == obs.error.message[:300]


def test_a_tool_call_of_no_readable_name_is_traced_under_its_own_id() -> None:
    rt, sent = _runtime()
    obs = rt.call(ToolCall(name=7, arguments={"host": "a"}, id="t1"), run_id="r")  # type: ignore[arg-type]
    observed = [e.call_id for e in rt.trace.events("r") if e.kind == "observation"]
    rt.close()
    assert sent == [] and obs.error is not None and obs.error.category == "parse_error"
    assert observed == [obs.call_id]
