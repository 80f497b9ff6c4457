"""An observation's repr hides its values while its run's label restricts them, as the trace views
hide that call's events, even when the observation's own label is public."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from actionspace import Labels, Observation, Runtime
from actionspace.policy import redact_events
from actionspace.types import Provenance

TICK = "tick-8417"


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def vault() -> str:
        """Read the vault."""
        return "hunter2"

    @rt.tool(effect="read", labels=Labels(confidentiality="internal", readers=frozenset({"bob"})))
    def memo() -> str:
        """Read bob's memo."""
        return "for bob"

    @rt.tool(effect="read")
    def clock() -> dict[str, Any]:
        """Read the clock."""
        return {"now": TICK}

    return rt


def _assert_hidden_as_in_the_trace(rt: Runtime, run_id: str, obs: Observation) -> None:
    assert obs.ok and obs.data == {"now": TICK}
    own = obs.provenance.labels  # its own label restricts nothing
    assert own and not any(tag == "secret" or tag.startswith("reader") for tag in own)
    shown = redact_events(rt.trace.events(run_id), None)
    assert shown and all(TICK not in str(e.data) for e in shown)
    text = repr(obs)
    assert TICK not in text and "[redacted]" in text
    assert "call_id=" in text and "'clock'" in text
    assert str(obs) == text


def test_a_public_result_of_a_secret_run_is_redacted_in_its_repr() -> None:
    rt = _runtime()
    assert rt.call({"name": "vault", "arguments": {}}, run_id="r1").ok
    obs = rt.call({"name": "clock", "arguments": {}}, run_id="r1")
    _assert_hidden_as_in_the_trace(rt, "r1", obs)


def test_a_public_result_of_a_reader_restricted_run_is_redacted_in_its_repr() -> None:
    rt = _runtime()
    assert rt.call({"name": "memo", "arguments": {}}, run_id="r2").ok
    obs = rt.call({"name": "clock", "arguments": {}}, run_id="r2")
    _assert_hidden_as_in_the_trace(rt, "r2", obs)


def test_an_awaited_call_of_a_secret_run_is_redacted_too() -> None:
    rt = _runtime()

    async def go() -> Observation:
        await rt.acall({"name": "vault", "arguments": {}}, run_id="r3")
        return await rt.acall({"name": "clock", "arguments": {}}, run_id="r3")

    _assert_hidden_as_in_the_trace(rt, "r3", asyncio.run(go()))


def test_each_call_of_a_message_in_a_secret_run_is_redacted() -> None:
    rt = _runtime()
    raw = {
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "vault", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "clock", "arguments": "{}"}},
        ]
    }
    observations = rt.call_all(raw, run_id="r4")
    assert [o.status for o in observations] == ["ok", "ok"]
    assert TICK not in repr(observations[1]) and "hunter2" not in repr(observations[0])


def test_a_plan_node_of_a_secret_run_is_redacted() -> None:
    rt = _runtime()
    assert rt.call({"name": "vault", "arguments": {}}, run_id="r5").ok
    result = rt.run_plan({"nodes": [{"id": "t", "tool": "clock", "arguments": {}}]}, run_id="r5")
    obs = result.nodes["t"]
    assert obs.ok and obs.data == {"now": TICK}
    assert TICK not in repr(obs)


def test_a_public_run_still_shows_its_values() -> None:
    rt = _runtime()
    obs = rt.call({"name": "clock", "arguments": {}}, run_id="r6")
    assert TICK in repr(obs)


def test_a_result_taken_before_the_run_became_secret_stays_shown() -> None:
    rt = _runtime()
    before = rt.call({"name": "clock", "arguments": {}}, run_id="r7")
    rt.call({"name": "vault", "arguments": {}}, run_id="r7")
    assert TICK in repr(before)  # its trace events were stored before the run turned secret


def test_an_observation_rebuilt_without_its_run_is_judged_by_its_own_labels() -> None:
    rt = _runtime()
    rt.call({"name": "vault", "arguments": {}}, run_id="r8")
    obs = rt.call({"name": "clock", "arguments": {}}, run_id="r8")
    assert TICK not in repr(obs)
    assert TICK in repr(Observation.from_dict(obs.to_dict()))  # no run: nothing says it is restricted
    assert obs == dataclasses.replace(obs)  # the run's label is no field: equality is unchanged
    marked = dataclasses.replace(obs, provenance=Provenance(labels=("secret",)))
    assert TICK not in repr(marked)
