"""ExecuteAndTimeout: the tool commits, then the call times out — repeated many times, in process.

Each trial calls a payment tool whose first send commits and then never answers within the
timeout. Expected: ``native`` and ``query`` tools end committed (found by resending with the same
key, or by the status query), ``none`` tools end in ``unknown_commit``; never a second payment,
never a blind resend of a ``none`` tool.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer

__all__ = ["execute_and_timeout"]

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def execute_and_timeout(trials: int, kind: str, *, timeout_s: float = 0.002) -> dict[str, Any]:
    """Run ``trials`` commit-then-timeout calls of a ``kind`` tool; count how each one ended."""
    from actionspace.catalog.spec import RetryPolicy
    from actionspace.runtime import Runtime
    from actionspace.types import ToolCall

    paid: Counter[int] = Counter()
    sends: Counter[int] = Counter()
    by_key: dict[str, int] = {}

    async def commit_then_hang(n: int, key: str | None) -> dict[str, Any]:
        sends[n] += 1
        if key is None or key not in by_key:
            paid[n] += 1
            if key is not None:
                by_key[key] = n
            if sends[n] == 1:
                await asyncio.sleep(timeout_s * 50)  # committed; the answer never comes in time
        return {"n": n}

    async def pay_none(n: int) -> dict[str, Any]:
        return await commit_then_hang(n, None)

    async def pay_keyed(n: int, idempotency_key: str) -> dict[str, Any]:
        return await commit_then_hang(n, idempotency_key)

    def status(*, key: str, arguments: dict[str, Any]) -> StatusAnswer:
        return Committed({"n": by_key[key]}) if key in by_key else NotCommitted()

    rt = Runtime("memory://", recover_on_start=False)
    options: dict[str, Any] = {
        "effect": "external",
        "idempotency": kind,
        "timeout_s": timeout_s,
        "retry": RetryPolicy(max_attempts=3, deadline_s=5.0),
    }
    if kind == "query":
        options["status_query"] = status
    rt.add_tool(name="pay", input_schema=SCHEMA, fn=pay_none if kind == "none" else pay_keyed, **options)
    outcomes: Counter[str] = Counter()

    async def run() -> None:
        for n in range(trials):
            obs = await rt.acall(ToolCall(name="pay", arguments={"n": n}), run_id="trials", node_id=f"n{n}")
            if obs.ok:
                outcomes[f"committed_by_{obs.diagnostics.get('resolved_by', 'first_send')}"] += 1
            else:
                outcomes[obs.error.category if obs.error else "?"] += 1

    asyncio.run(run())
    rt.close()
    return {
        "kind": kind,
        "trials": trials,
        "outcomes": dict(outcomes),
        "duplicates": sum(c - 1 for c in paid.values() if c > 1),
        "lost": trials - len(paid),
        "blind_resends": sum(c - 1 for c in sends.values() if c > 1) if kind == "none" else 0,
    }
