"""Amounts of the budgets' units (:class:`Usage`, re-exported by :mod:`actionspace.policy.budget`)
and the vectors a meter adds them as: every count a finite number or infinite, never NaN, never
an integer a store's float columns cannot hold."""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from actionspace._fast import fast_init
from actionspace.policy._budget_limits import UNITS

__all__ = ["ZERO", "Usage", "admissible", "as_usage", "vector"]


@fast_init
@dataclass(frozen=True, kw_only=True)
class Usage:
    """An amount of every unit: what a call is estimated to use, or what has been used."""

    calls: int = 0
    items: int = 0
    bytes: int = 0
    """Observation bytes (canonical JSON of what the model is shown)."""
    money: float = 0.0
    """In the units of ``ToolSpec.cost``."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            items=self.items + other.items,
            bytes=self.bytes + other.bytes,
            money=self.money + other.money,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls - other.calls,
            items=self.items - other.items,
            bytes=self.bytes - other.bytes,
            money=self.money - other.money,
        )

    def to_dict(self) -> dict[str, float]:
        return {"calls": self.calls, "items": self.items, "bytes": self.bytes, "money": round(self.money, 9)}

    def fits(self, remaining: Mapping[str, float]) -> bool:
        """True when no unit exceeds what ``remaining`` allows of it (a unit not named there is unlimited)."""
        return all(getattr(self, unit) <= left for unit, left in remaining.items())


ZERO = Usage()
_REAL = sys.float_info.max
"""The largest count a store's float columns hold; an integer beyond it (none that a real call
uses) is no real number to add, and counts as infinite."""


def vector(usage: Usage) -> tuple[float, float, float, float]:
    """The units of ``usage`` as the meter adds them: a negative amount (a misconfigured negative
    cost) counts as 0, never as a refund, and NaN, or an integer too large for a float, as
    infinite, so it never fits a limit."""
    v = (usage.calls, usage.items, usage.bytes, usage.money)
    if 0 <= v[0] <= _REAL and 0 <= v[1] <= _REAL and 0 <= v[2] <= _REAL and v[3] >= 0:
        return v
    calls, items, nbytes, money = (x if 0 <= x <= _REAL else 0 if x < 0 else math.inf for x in v)
    return (calls, items, nbytes, money)


def admissible(amount: Usage, limited: frozenset[int]) -> tuple[tuple[float, float, float, float], Usage]:
    """``amount`` as a meter admits and counts it, with its :func:`vector`: an infinite unit (a
    cost that is not a real number) that no budget limits counts as 0 while reserved, so settling
    it never subtracts an infinity (NaN in every count after); a limited one never fits anyway."""
    need = vector(amount)
    if all(x < math.inf for x in need) or any(need[i] == math.inf for i in limited):
        return need, amount
    counted = dataclasses.replace(amount, **{UNITS[i]: 0 for i in range(4) if need[i] == math.inf})
    return vector(counted), counted


def as_usage(counts: list[float]) -> Usage:
    """The :class:`Usage` a meter's vector counts."""
    calls, items, nbytes, money = counts
    return Usage(calls=int(calls), items=int(items), bytes=int(nbytes), money=money)
