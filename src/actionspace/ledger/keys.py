"""The idempotency key the runtime mints for a side-effecting action (DESIGN §6), and the digest of
an action's arguments; both hash RFC 8785 canonical JSON, byte for byte (DESIGN §7), as
:func:`actionspace._canonical.canonical_json` writes it. Arguments holding an integer beyond
RFC 8785's domain (±2**53) hash a form of their own (:func:`~actionspace._canonical.digest_json`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from actionspace._canonical import args_digest, canonical_json, digest_json

__all__ = ["args_digest", "canonical_json", "idempotency_key"]


def idempotency_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """``as1_`` + first 32 hex of sha256 over the RFC 8785 JSON of (run, node, name@version, args)
    (:func:`~actionspace._canonical.digest_json`: integers beyond 2**53 take its other form)."""
    digest = hashlib.sha256(digest_json([run_id, node_id, tool_key, arguments])).hexdigest()
    return f"as1_{digest[:32]}"
