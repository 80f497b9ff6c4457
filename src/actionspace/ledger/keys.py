"""The idempotency key the runtime mints for a side-effecting action (DESIGN §6), and the digest of
an action's arguments; both hash RFC 8785 canonical JSON, byte for byte (DESIGN §7), as
:func:`actionspace._canonical.canonical_json` writes it. Arguments holding an integer beyond
RFC 8785's domain (±2**53) hash a form of their own (:func:`~actionspace._canonical.digest_json`).

Both read the arguments' strings up to Unicode canonical equivalence (NFC, :func:`nfc_json`), and
so does the default path's node identity (:func:`actionspace.pipeline.identity_node`, over
:func:`args_digest`): ``"café"`` composed and decomposed are one action, one node and one key.
Arguments already in NFC (ASCII ones, and nearly all others) hash exactly the bytes they always did.
"""

from __future__ import annotations

import hashlib
from typing import Any

from actionspace._canonical import canonical_json, digest_json
from actionspace._unicode import nfc_form

__all__ = ["args_digest", "canonical_json", "idempotency_key", "identity_digests", "nfc_json"]


def nfc_json(value: Any, arguments: Any) -> bytes:
    """:func:`~actionspace._canonical.digest_json` of ``value`` (which holds ``arguments``) with
    ``arguments``' strings in NFC (:func:`~actionspace._unicode.nfc_form`); ``value`` itself
    when its text is ASCII or ``arguments`` are NFC already, so their bytes are those of before.

    ``value`` other than ``arguments``: a list ending with them (the key's run, node and tool
    before them), whose other strings are read as given."""
    encoded = digest_json(value)
    if not encoded.isascii():
        composed = nfc_form(arguments)
        if composed is not arguments:
            encoded = digest_json(composed if value is arguments else [*value[:-1], composed])
    return encoded


def idempotency_key(run_id: str, node_id: str, tool_key: str, arguments: Any) -> str:
    """``as1_`` + first 32 hex of sha256 over the RFC 8785 JSON of (run, node, name@version, args)
    (:func:`~actionspace._canonical.digest_json`: integers beyond 2**53 take its other form), the
    arguments' strings in NFC (:func:`nfc_json`).

    One node, one key: a proposal of a node in another normal form (``"cafe\\u0301"`` for
    ``"caf\\u00e9"``) gets the key the node was sent under, so a tool that dedupes by the key
    (``idempotency="native"``), sent again after an abandoned attempt, dedupes it.
    """
    digest = hashlib.sha256(nfc_json([run_id, node_id, tool_key, arguments], arguments)).hexdigest()
    return f"as1_{digest[:32]}"


def identity_digests(arguments: Any) -> tuple[str, str | None]:
    """(:func:`args_digest` of ``arguments``, the digest of them as written when that differs):
    sha256 hex of :func:`~actionspace._canonical.digest_json` of their NFC form, and of their own
    when a string of theirs is not NFC (None otherwise) — what node identity read before it read
    NFC, so an entry stored then is still found (:mod:`actionspace.pipeline.stages`)."""
    encoded = digest_json(arguments)
    if encoded.isascii():
        return hashlib.sha256(encoded).hexdigest(), None
    composed = nfc_form(arguments)
    if composed is arguments:
        return hashlib.sha256(encoded).hexdigest(), None
    return hashlib.sha256(digest_json(composed)).hexdigest(), hashlib.sha256(encoded).hexdigest()


def args_digest(arguments: Any) -> str:
    """sha256 hex of :func:`~actionspace._canonical.digest_json` of ``arguments`` with every string
    in Unicode NFC (:func:`nfc_json`).

    A model may send ``"café"`` composed once and decomposed (``"cafe\\u0301"``) the next time: the
    same text, which the ledger's check for an unsettled identical action (DESIGN §11) must find,
    or a lost write would be sent again; the default path's node identity reads it so too, so a
    committed one is replayed. Arguments already in NFC keep the digest they always had.
    """
    return hashlib.sha256(nfc_json(arguments, arguments)).hexdigest()
