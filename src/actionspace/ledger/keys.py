"""The idempotency key the runtime mints for a side-effecting action (DESIGN §6), and the digest of
an action's arguments; both hash RFC 8785 canonical JSON, byte for byte (DESIGN §7), as
:func:`actionspace._canonical.canonical_json` writes it. Arguments holding an integer beyond
RFC 8785's domain (±2**53) hash a form of their own (:func:`~actionspace._canonical.digest_json`).

The digest (what the ledger finds an identical action of the run by, while it is unsettled) reads
strings up to Unicode canonical equivalence (:func:`args_digest`); the key reads them as given.
"""

from __future__ import annotations

import hashlib
from typing import Any

from actionspace._canonical import canonical_json, digest_json
from actionspace._unicode import nfc_form

__all__ = ["args_digest", "canonical_json", "idempotency_key"]


def idempotency_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """``as1_`` + first 32 hex of sha256 over the RFC 8785 JSON of (run, node, name@version, args)
    (:func:`~actionspace._canonical.digest_json`: integers beyond 2**53 take its other form)."""
    digest = hashlib.sha256(digest_json([run_id, node_id, tool_key, arguments])).hexdigest()
    return f"as1_{digest[:32]}"


def args_digest(arguments: Any) -> str:
    """sha256 hex of :func:`~actionspace._canonical.digest_json` of ``arguments`` with every string
    in Unicode NFC (:func:`~actionspace._unicode.nfc_form`).

    A model may send ``"café"`` composed once and decomposed (``"cafe\\u0301"``) the next time: the
    same text, which the ledger's check for an unsettled identical action (DESIGN §11) must find,
    or a lost write would be sent again. Arguments already in NFC (ASCII ones, and nearly all
    others) keep the digest they always had; the idempotency key, which a tool may dedupe by,
    still reads every string as given.
    """
    encoded = digest_json(arguments)
    if not encoded.isascii():
        composed = nfc_form(arguments)
        if composed is not arguments:
            encoded = digest_json(composed)
    return hashlib.sha256(encoded).hexdigest()
