"""Which tools of a snapshot a principal holds every scope of, for 10,000 tools at once.

Same meaning as :meth:`Principal.allows` (case-sensitive ``fnmatch`` globs, any pattern may match),
computed per pattern over the snapshot's distinct scope strings instead of per tool:

- ``*`` matches everything;
- a pattern without ``*``, ``?`` or ``[`` matches one string (a dict look-up);
- ``prefix*`` (one trailing star, no other wildcard) matches a contiguous range of the sorted
  strings: two binary searches;
- anything else falls back to the pattern's regular expression over every distinct string.

A tool is permitted when each of its scopes is matched by some pattern (a tool without scopes
always is), as :func:`actionspace.policy.principal.authorize` decides at call time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import translate
from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = ["ScopeTable"]

_WILDCARDS: Final = re.compile(r"[*?\[]")
_TOP: Final = "\U0010ffff"
"""Above every character: ``prefix + _TOP`` bounds the sorted range of strings starting with prefix."""

Mask = npt.NDArray[np.bool_]


class ScopeTable:
    """The scopes of each tool of a snapshot, prepared for :meth:`permitted`. Immutable."""

    def __init__(self, scopes_per_tool: Sequence[Sequence[str]]) -> None:
        ids: dict[str, int] = {}
        single = np.full(len(scopes_per_tool), -1, dtype=np.int64)
        multi: list[tuple[int, tuple[int, ...]]] = []
        for i, scopes in enumerate(scopes_per_tool):
            own = tuple(ids.setdefault(s, len(ids)) for s in scopes)
            if len(own) == 1:
                single[i] = own[0]
            else:
                multi.append((i, own))
        self._ids = ids
        self._strings = list(ids)
        order = sorted(range(len(self._strings)), key=self._strings.__getitem__)
        self._sorted = np.array([self._strings[i] for i in order], dtype=str)
        self._sorted_ids = np.array(order, dtype=np.int64)
        self._single = single
        self._has_single = single >= 0
        self._single_ids = np.where(self._has_single, single, 0)
        self._multi = multi

    def _pattern(self, pattern: str, out: Mask) -> None:
        """Set ``out[id]`` for every distinct scope string ``pattern`` matches."""
        if pattern == "*":
            out[: len(self._strings)] = True
            return
        if not _WILDCARDS.search(pattern):
            hit = self._ids.get(pattern)
            if hit is not None:
                out[hit] = True
            return
        head = pattern[:-1]
        if pattern.endswith("*") and not _WILDCARDS.search(head):
            lo, hi = (int(x) for x in np.searchsorted(self._sorted, [head, head + _TOP], side="left"))
            while hi < len(self._sorted) and str(self._sorted[hi]).startswith(head):
                hi += 1  # a string continuing with U+10FFFF itself sorts at or above the bound
            out[self._sorted_ids[lo:hi]] = True
            return
        match = re.compile(translate(pattern)).match
        hits = np.fromiter((match(s) is not None for s in self._strings), np.bool_, len(self._strings))
        out[: len(self._strings)] |= hits

    def permitted(self, patterns: Sequence[str]) -> Mask:
        """Per tool: True when every scope it requires matches one of ``patterns``."""
        ok = np.zeros(len(self._strings) + 1, dtype=np.bool_)  # the extra slot keeps ok[0] valid
        for pattern in patterns:
            self._pattern(pattern, ok)
        tools: Mask = ok[self._single_ids] & self._has_single
        for i, own in self._multi:
            tools[i] = bool(ok[list(own)].all()) if own else True
        return tools
