"""The workload every path runs: the tools, their arguments in each input format, and the batch shape."""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = [
    "ARGS_DICTS",
    "ARGS_JSON",
    "BATCH",
    "EXPECTED",
    "SLOW_S",
    "VARIANTS",
    "add",
    "add_async",
    "openai_call",
    "openai_calls",
    "slow",
]

SLOW_S = 0.010
"""Sleep of each batch call, in seconds: the ideal wall time of a perfectly parallel batch."""

BATCH = 100
"""Calls issued at once in a batch row."""

VARIANTS = 1000
"""Distinct argument sets per path; call ``i`` uses set ``i % VARIANTS``, built before timing."""

EXPECTED = 3
"""What call ``0`` returns (``a=1, b=2``): every row checks it before timing."""


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first addend.
        b: second addend.
    """
    return a + b


async def add_async(a: int, b: int) -> int:
    """Add two integers, as a coroutine.

    Args:
        a: first addend.
        b: second addend.
    """
    return a + b


async def slow(x: int) -> int:
    """Sleep 10 ms, then return x.

    Args:
        x: the value to return.
    """
    await asyncio.sleep(SLOW_S)
    return x


def _args(i: int) -> dict[str, int]:
    return {"a": 1 + i, "b": 2}


ARGS_DICTS: list[dict[str, int]] = [_args(i) for i in range(VARIANTS)]
"""Call ``i``'s arguments as a dict (``a = 1 + i``, ``b = 2``)."""

ARGS_JSON: list[str] = [json.dumps(d, separators=(",", ":")) for d in ARGS_DICTS]
"""The same arguments as the JSON string a model emits."""


def openai_call(name: str, arguments: dict[str, Any], call_id: str) -> str:
    """One OpenAI-format tool call as a JSON string (arguments nested as a JSON string)."""
    return json.dumps(
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments, separators=(",", ":"))},
        },
        separators=(",", ":"),
    )


def openai_calls(name: str) -> list[str]:
    """``VARIANTS`` OpenAI-format call strings of tool ``name`` with the shared arguments."""
    return [openai_call(name, ARGS_DICTS[i], f"call_{i + 1}") for i in range(VARIANTS)]
