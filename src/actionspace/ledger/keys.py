"""The idempotency key the runtime mints for a side-effecting action (DESIGN §6)."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

__all__ = ["idempotency_key"]


def idempotency_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """``as1_`` + first 32 hex of sha256 over the RFC 8785 JSON of (run, node, name@version, args)."""
    digest = hashlib.sha256(rfc8785.dumps([run_id, node_id, tool_key, arguments])).hexdigest()
    return f"as1_{digest[:32]}"
