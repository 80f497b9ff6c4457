"""An event's data recorded again and again unchanged, with its encoding made once.

A plan object run again records the same ``plan_started`` every run: a thousand node entries and
as many edge lists for a plan of a thousand nodes, which the memory trace store would encode
(``marshal``) on every run, and the collector walk until then. :class:`Encoded` holds that data
together with its ``marshal`` encoding, made once: the memory store keeps the encoding alone (the
same bytes object for every run) and decodes it when the trace is read, so each reader gets
objects of its own. Anything else sees an ordinary ``dict``.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

__all__ = ["Encoded", "encoded"]


class Encoded(dict[str, Any]):
    """``dict`` of an event's data, with ``blob``: its ``marshal`` encoding, made from it."""

    __slots__ = ("blob",)

    blob: bytes

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        # a batch the memory store pickles (one marshal refused) reads back a plain dict
        return dict, (dict(self),)


def encoded(data: Mapping[str, Any]) -> Encoded | None:
    """``data`` with its encoding; None when ``marshal`` cannot encode it as it is (a value of a
    type it does not know, or of a subclass, which it does not keep)."""
    kept = Encoded(data)
    try:
        kept.blob = marshal.dumps(dict(kept))
    except ValueError:
        return None
    return kept
