"""The runtime the framework adapters' tests share: a card charge that must run once, after approval."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actionspace import Runtime


@dataclass
class Shop:
    """A runtime with ``charge`` (approval required, effect write) and ``lookup`` (a read)."""

    rt: Runtime
    charges: list[tuple[str, int]] = field(default_factory=list)


def shop() -> Shop:
    rt = Runtime("memory://")
    out = Shop(rt)

    @rt.tool(effect="write", writes=["card:{card}"], requires_approval=True)
    def charge(card: str, cents: int) -> dict[str, Any]:
        """Charge a card, in cents."""
        out.charges.append((card, cents))
        return {"charged": cents, "card": card}

    @rt.tool(effect="read")
    def lookup(order: str) -> dict[str, Any]:
        """The amount due on an order."""
        return {"order": order, "cents": 500}

    return out


def trace_kinds(s: Shop, run_id: str) -> list[str]:
    return [e.kind for e in s.rt.trace.events(run_id)]
