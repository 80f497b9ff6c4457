"""The confidence gate of a session judges that session's calls only.

Two sessions may drive one run at once (a user who sends a second message before the first is
answered; a loop and a console). Each session's gate and confidence belong to its own
``handle``: a gated session's low confidence never reaches another session's calls, and another
session ending its turn never lifts the gate off calls still to be judged.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from actionspace import Runtime

DEADLINE_S = 30.0


class Threshold:
    """Runs a read whatever the confidence, anything else at 0.5 and above; asks the user below."""

    def decide(self, confidence: float, effect: str, risk: str = "low") -> str:
        return "execute" if effect == "none" or confidence >= 0.5 else "ask_user"


def _message(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    entries = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": entries}


def _world() -> tuple[Runtime, list[str], asyncio.Event, asyncio.Event]:
    rt = Runtime("memory://")
    sent: list[str] = []
    reading = asyncio.Event()
    go_on = asyncio.Event()

    @rt.tool(effect="none")
    async def look(topic: str) -> str:
        """Read about a topic (waits until the test lets it answer)."""
        reading.set()
        await asyncio.wait_for(go_on.wait(), DEADLINE_S)
        return f"about {topic}"

    @rt.tool(effect="external", idempotency="none")
    def send(to: str, text: str) -> str:
        """Send a message."""
        sent.append(to)
        return "sent"

    return rt, sent, reading, go_on


def test_another_sessions_turn_never_lifts_the_gate_off_calls_still_to_judge() -> None:
    async def main() -> None:
        rt, sent, reading, go_on = _world()
        unsure = rt.session(run_id="conv", provider="openai_chat")
        sure = rt.session(run_id="conv", provider="openai_chat")
        unsure.gate = sure.gate = Threshold()
        unsure.user("look up the weather, then text Bob")
        first = asyncio.create_task(
            unsure.ahandle(
                _message(("a", "look", {"topic": "weather"}), ("b", "send", {"to": "bob", "text": "hi"})),
                confidence=0.1,
            )
        )
        await asyncio.wait_for(reading.wait(), DEADLINE_S)  # the unsure turn's first call runs
        other = await asyncio.wait_for(  # another session's turn, while the first's call runs
            sure.ahandle(_message(("c", "send", {"to": "carol", "text": "hi"})), confidence=0.9), DEADLINE_S
        )
        assert other.observations[0].data == "sent"
        go_on.set()
        turn = await asyncio.wait_for(first, DEADLINE_S)
        held = turn.observations[1]
        assert held.error is not None and held.error.category == "needs_approval", held
        assert held.error.details["gate"] == "ask_user"
        assert sent == ["carol"]
        rt.close()

    asyncio.run(main())


def test_a_gated_sessions_confidence_never_judges_another_sessions_calls() -> None:
    async def main() -> None:
        rt, sent, reading, go_on = _world()
        unsure = rt.session(run_id="conv", provider="openai_chat")
        plain = rt.session(run_id="conv", provider="openai_chat")  # no gate: every call runs
        unsure.gate = Threshold()
        unsure.user("look up the weather, then text Bob")
        first = asyncio.create_task(
            unsure.ahandle(
                _message(("a", "look", {"topic": "weather"}), ("b", "send", {"to": "bob", "text": "hi"})),
                confidence=0.1,
            )
        )
        await asyncio.wait_for(reading.wait(), DEADLINE_S)
        other = await asyncio.wait_for(
            plain.ahandle(_message(("c", "send", {"to": "carol", "text": "hi"}))), DEADLINE_S
        )
        assert other.observations[0].error is None, other.observations[0]
        assert other.observations[0].data == "sent"
        go_on.set()
        turn = await asyncio.wait_for(first, DEADLINE_S)
        held = turn.observations[1]
        assert held.error is not None and held.error.category == "needs_approval", held
        assert sent == ["carol"]
        rt.close()

    asyncio.run(main())
