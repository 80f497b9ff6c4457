"""What ``Runtime.astream`` shows the model joins the run's context label, as ``call`` does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from actionspace import Labels, Runtime, ToolCall
from actionspace.execution.streaming import StreamPolicy
from actionspace.policy import Label

SECRET = "hunter2-correct-horse"
EVERY_CHUNK = StreamPolicy(every_bytes=0)


def _world() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://", recover_on_start=False)
    sent: list[dict[str, Any]] = []

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return SECRET

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    async def tail_vault(n: int) -> AsyncIterator[str]:
        """Stream the vault's log, n lines."""
        for i in range(n):
            yield f"{SECRET} #{i}\n"

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append({"recipient": recipient, "body": body})
        return "sent"

    return rt, sent


async def _stream(rt: Runtime, run: str, call: ToolCall, *, stop_after: int | None = None) -> int:
    shown = 0
    async for _ in rt.astream(call, run_id=run, policy=EVERY_CHUNK):
        shown += 1
        if stop_after is not None and shown >= stop_after:
            break  # the caller stops reading: the final observation never comes
    return shown


@pytest.mark.parametrize(
    ("call", "stop_after"),
    [
        (ToolCall(name="read_password", arguments={}), None),  # one final observation
        (ToolCall(name="tail_vault", arguments={"n": 3}), None),  # provisional ones, then the final
        (ToolCall(name="tail_vault", arguments={"n": 3}), 1),  # one provisional, then abandoned
    ],
)
def test_a_secret_shown_through_astream_never_reaches_an_external_sink(
    call: ToolCall, stop_after: int | None
) -> None:
    rt, sent = _world()
    run = rt.new_run()
    rt.user_input(run, "Email bob@example.com the vault log.")
    try:
        assert asyncio.run(_stream(rt, run, call, stop_after=stop_after)) >= 1
        assert rt.context_label(run) == Label(confidentiality="secret")
        blocked = rt.call(
            {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": f"{SECRET} #0"}},
            run_id=run,
            sources={"recipient": ["user"]},
        )
    finally:
        rt.close()
    assert blocked.error is not None and blocked.error.category == "policy_violation"
    assert sent == []


def test_a_public_stream_leaves_the_context_public_and_the_email_goes_out() -> None:
    rt, sent = _world()

    @rt.tool(effect="read", labels=Labels(confidentiality="public"))
    async def tail_news(n: int) -> AsyncIterator[str]:
        """Stream the public news, n lines."""
        for i in range(n):
            yield f"headline {i}\n"

    run = rt.new_run()
    rt.user_input(run, "Email bob@example.com the headlines.")
    try:
        asyncio.run(_stream(rt, run, ToolCall(name="tail_news", arguments={"n": 2})))
        assert rt.context_label(run) == Label()
        done = rt.call(
            {"name": "send_email", "arguments": {"recipient": "bob@example.com", "body": "headline 0"}},
            run_id=run,
            sources={"recipient": ["user"]},
        )
    finally:
        rt.close()
    assert done.error is None
    assert sent == [{"recipient": "bob@example.com", "body": "headline 0"}]
