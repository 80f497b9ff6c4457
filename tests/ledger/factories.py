"""Ledger entries and approval requests for the store tests."""

from __future__ import annotations

import hashlib
from typing import Any

from actionspace.approval.requests import ApprovalRequest
from actionspace.ledger.entries import LedgerEntry

NOW = 1_700_000_000.0


def digest(arguments: Any) -> str:
    return hashlib.sha256(repr(arguments).encode()).hexdigest()


def key_for(run_id: str, node_id: str, args_digest: str) -> str:
    return "as1_" + hashlib.sha256(f"{run_id}|{node_id}|{args_digest}".encode()).hexdigest()[:32]


def entry(
    node_id: str = "n1", *, run_id: str = "r1", amount: int = 10, at: float = NOW, **changes: Any
) -> LedgerEntry:
    """An ``accepted`` entry for ``pay(amount)`` at node ``node_id``, created and updated at ``at``."""
    arguments = {"amount": amount, "to": "acct_7", "memo": "café ☕"}
    args_digest = digest(arguments)
    fields: dict[str, Any] = {
        "key": key_for(run_id, node_id, args_digest),
        "run_id": run_id,
        "node_id": node_id,
        "tool": "pay@1",
        "args_digest": args_digest,
        "arguments": arguments,
        "created_at": at,
        "updated_at": at,
    }
    fields.update(changes)
    return LedgerEntry(**fields)


def request(
    *, run_id: str = "r1", amount: int = 10, request_id: str = "apr_1", at: float = NOW, **changes: Any
) -> ApprovalRequest:
    """A pending approval request for ``pay(amount)`` in ``run_id``."""
    arguments = {"amount": amount, "to": "acct_7"}
    fields: dict[str, Any] = {
        "id": request_id,
        "run_id": run_id,
        "node_id": "n1",
        "tool": "pay@1",
        "args_digest": digest(arguments),
        "arguments": arguments,
        "provenance": {"amount": "user", "to": "tool_result:c1"},
        "effects": ("ledger:acct_7",),
        "reason": "payments over 5 need a person",
        "details": {"limit": 5, "nested": {"ok": [1, 2.5, None]}},
        "created_at": at,
    }
    fields.update(changes)
    return ApprovalRequest(**fields)
