"""The encoded text of event payloads that recur, kept by the payload object's identity.

Several payloads of a call are not made per call: the ``authorized`` and ``validated`` payloads of
a tool's simple calls (:class:`~actionspace.trace.events.CallShape`) and the ``flow_checked``
payload of a precompiled side-effecting call are one object, recorded by every call of that tool
under one run label. Encoding them again on every call was about 40 % of the encoding a durable
call's nine events cost on the caller's thread (the interpreter's lock serializes it between
concurrent callers). A recorded payload is never mutated afterwards (the memory store keeps the
objects themselves, so a change would rewrite its trace), so the text written for an object once
is its text for as long as the object is held here.

Only the payloads of :data:`SHARED_KINDS` are looked up here: a call's other payloads (``parsed``,
``ledger``, ``dispatched``, ``observation``) are made per call, and keeping them cost more than
encoding them (a turn of the lock, an entry made and another let go, and each payload held alive
for some forty calls more). A kept text is found without the lock: a dictionary's ``get`` is one
step, and the entry is used only when it holds the very object asked about.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = ["KEPT", "SHARED_KINDS", "PayloadTexts"]

KEPT: Final = 256
"""Payloads whose text is kept: the recurring ones of a few dozen tools; when more arrive, those
kept longest are let go first."""
SHARED_KINDS: Final = frozenset({"authorized", "validated", "flow_checked"})
"""The kinds of event whose payload may be one object recorded by many calls (see above)."""


class PayloadTexts:
    """``encode(data)`` for each payload, once per ``dict`` object among the last :data:`KEPT`.

    An entry holds its object, so the object's ``id`` is not reused while the entry is kept; an
    entry whose object is not the one asked about (an ``id`` reused after eviction) is encoded
    again. Safe to call from several threads.
    """

    def __init__(self, encode: Callable[[Mapping[str, Any]], str], kept: int = KEPT) -> None:
        self._encode = encode
        self._limit = kept
        self.kept: dict[int, tuple[Mapping[str, Any], str]] = {}
        """By the payload's ``id``: (the payload, its text). Read without the lock: an entry is the
        text of the payload it holds, which is the one asked about only when it is that object."""
        self._lock = threading.Lock()

    def text(self, data: Mapping[str, Any]) -> str:
        """The text ``encode`` gives ``data``; raises whatever ``encode`` raises."""
        if type(data) is not dict:  # another mapping may read differently each time
            return self._encode(data)
        hit = self.kept.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        text = self._encode(data)
        with self._lock:  # an entry made and the oldest let go, as one step among threads
            texts = self.kept
            texts[id(data)] = (data, text)
            if len(texts) > self._limit:
                del texts[next(iter(texts))]
        return text
