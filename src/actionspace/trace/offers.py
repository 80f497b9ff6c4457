"""What a ``candidates_offered`` event says each offer left out, written small for large catalogs.

An offer records the tools it considered (the *full set*: every ``name@version`` of the catalog,
retired versions included), the ones it offered and why each other one was left out. Listing
that whole for every offer grows the trace by the catalog's size every turn: 10,000 tools are
about 880 KB of JSON an offer. So the event has two forms, both read by :func:`left_out_of`:

- **Listed** (a full set of at most :data:`LISTED_MAX` tools): ``full_set`` (list of keys) and
  ``left_out`` (``{"name": key, "reason": reason}`` per tool left out), in every event.
- **Packed** (a larger full set):

  - ``catalog``: a digest of the full set (:func:`catalog_digest`), naming the catalog snapshot;
  - ``full_set``: only in the first event of the run (per process) that names this ``catalog``;
    later events of the run naming it leave it out;
  - ``left_out_codes``: one ASCII letter per tool of the full set, in its order (``.`` offered,
    else :data:`CODES`), compressed with zlib and encoded in base64.

Both forms carry ``reasons`` (how many tools each reason left out) and ``offered``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Final

__all__ = [
    "CODES",
    "LISTED_MAX",
    "OFFERED_CODE",
    "catalog_digest",
    "left_out_of",
    "pack_codes",
    "with_full_set",
]

LISTED_MAX: Final = 200
"""Full sets of at most this many tools are listed in every event; larger ones are packed."""

CODES: Final[Mapping[str, str]] = {
    "retired": "r",
    "not_requested": "n",
    "phase": "p",
    "capability": "c",
    "error_state": "e",
    "permission": "s",
    "rank_cut": "k",
}
"""The letter of each reason a tool can be left out for, in ``left_out_codes``."""

OFFERED_CODE: Final = "."
"""The letter of an offered tool in ``left_out_codes``."""

_REASON_OF: Final = {code: reason for reason, code in CODES.items()}


def catalog_digest(full_set: Iterable[str]) -> str:
    """A short digest naming a full set (its keys in order): the ``catalog`` of a packed event."""
    return hashlib.sha256("\n".join(full_set).encode()).hexdigest()[:16]


def pack_codes(codes: bytes) -> str:
    """``left_out_codes`` from one letter per tool of the full set."""
    return base64.b64encode(zlib.compress(codes, 6)).decode("ascii")


def left_out_of(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(key, reason)`` for every tool the offer recorded in ``data`` left out, in full-set order.

    A packed event needs its ``full_set`` (see :func:`with_full_set` for a run's later events).
    Raises ValueError when ``data`` says neither form, or its parts do not fit together.
    """
    listed = data.get("left_out")
    if isinstance(listed, list):
        items = (item for item in listed if isinstance(item, Mapping))
        return [(str(item.get("name")), str(item.get("reason"))) for item in items]
    packed = data.get("left_out_codes")
    if not isinstance(packed, str):
        raise ValueError("the event records neither left_out nor left_out_codes")
    full = data.get("full_set")
    if not isinstance(full, list):
        raise ValueError(f"the event names catalog {data.get('catalog')!r} but holds no full_set")
    try:
        codes = zlib.decompress(base64.b64decode(packed, validate=True)).decode("ascii")
    except (binascii.Error, zlib.error, UnicodeDecodeError) as exc:
        raise ValueError(f"left_out_codes does not decode: {exc}") from None
    if len(codes) != len(full):
        raise ValueError(f"{len(codes)} codes for a full set of {len(full)} tools")
    out: list[tuple[str, str]] = []
    for key, code in zip(full, codes, strict=True):
        if code == OFFERED_CODE:
            continue
        reason = _REASON_OF.get(code)
        if reason is None:
            raise ValueError(f"unknown left-out code {code!r}")
        out.append((str(key), reason))
    return out


def with_full_set(data: Mapping[str, Any], seen: MutableMapping[str, Sequence[str]]) -> Mapping[str, Any]:
    """``data`` with the ``full_set`` of its ``catalog`` when it left it out, read from ``seen``
    (catalog → full set of the run's earlier events, in order); an event carrying one is noted."""
    catalog = data.get("catalog")
    if not isinstance(catalog, str):
        return data
    full = data.get("full_set")
    if isinstance(full, list):
        seen[catalog] = full
        return data
    known = seen.get(catalog)
    return data if known is None else {**data, "full_set": list(known)}
