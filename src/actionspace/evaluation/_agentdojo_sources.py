"""Honest argument sources for replayed ground-truth calls.

A value the user typed is bound to ``"user"``; a value read from an earlier observation is bound
to that observation's call id. A value found nowhere (computed by the model, such as a date it
worked out) is not bound at all, so the run's context label applies to it (the conservative rule).
The runtime checks every claim again (:func:`actionspace.policy.flow.occurs`, the same test used
here); this module only says what an honest model would claim.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actionspace.policy.flow import USER, occurs
from actionspace.policy.occurrence import scalars

__all__ = ["Seen", "declared_sources", "leaves"]


@dataclass(frozen=True, slots=True)
class Seen:
    """One earlier observation the model was shown: its call id and its data."""

    call_id: str
    data: Any


def leaves(value: Any) -> Iterator[Any]:
    """The scalar pieces of ``value`` (strings, numbers, booleans, object keys; None and "" carry
    nothing)."""
    return (leaf for leaf in scalars(value) if leaf is not None and leaf != "")


def declared_sources(arguments: Mapping[str, Any], prompt: str, seen: Sequence[Seen]) -> dict[str, list[str]]:
    """Per argument, the sources an honest model names for it (arguments found nowhere: absent).

    The user's prompt comes first; otherwise the most recent observation holding the whole value.
    A value whose pieces come from several sources names each piece's source.
    """
    out: dict[str, list[str]] = {}
    for name, value in arguments.items():
        pieces = list(leaves(value))
        if not pieces:
            continue
        whole = _source_of(value, prompt, seen)
        if whole is not None:
            out[name] = [whole]
            continue
        names: list[str] = []
        for piece in pieces:
            source = _source_of(piece, prompt, seen)
            if source is None:
                names = []
                break
            if source not in names:
                names.append(source)
        if names:
            out[name] = names
    return out


def _source_of(value: Any, prompt: str, seen: Sequence[Seen]) -> str | None:
    if occurs(value, [prompt]):
        return USER
    for item in reversed(seen):
        if occurs(value, [item.data]):
            return item.call_id
    return None
