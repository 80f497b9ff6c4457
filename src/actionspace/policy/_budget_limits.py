"""The limits of budgets: a :class:`Budget` per run or per principal, several composed as
:class:`Budgets` (re-exported by :mod:`actionspace.policy.budget`, where they are enforced)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from actionspace.errors import ConfigurationError

__all__ = ["UNITS", "Budget", "Budgets", "Unit"]

Unit = Literal["calls", "items", "bytes", "money"]
UNITS: tuple[Unit, ...] = ("calls", "items", "bytes", "money")


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Limits on the usage of one run or one principal; None leaves a unit unlimited."""

    calls: int | None = None
    """Dispatched calls (a batch is one call; a cache hit is none). Default unlimited."""
    items: int | None = None
    """Items acted on (a batch counts its items, a single call one). Default unlimited."""
    bytes: int | None = None
    """Observation bytes shown to the model. Default unlimited."""
    money: float | None = None
    """In the units of ``ToolSpec.cost``. Default unlimited."""
    per: Literal["run", "principal"] = "run"
    """``run``: each run of a principal has its own allowance (another principal naming the same run
    id has one of its own); ``principal``: shared by all runs of a principal."""

    def __post_init__(self) -> None:
        if self.per not in ("run", "principal"):
            raise ConfigurationError(f"Budget.per must be 'run' or 'principal', got {self.per!r}")
        limits = self.limits()
        if not limits:
            raise ConfigurationError("a Budget needs at least one limit (calls, items, bytes or money)")
        for unit, limit in limits.items():
            if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit >= 0:
                raise ConfigurationError(f"Budget.{unit} must be a number >= 0, got {limit!r}")
            if isinstance(limit, int) and limit > sys.float_info.max:  # no count compares with it
                raise ConfigurationError(f"Budget.{unit} is beyond any float: leave it None for no limit")

    def limits(self) -> dict[Unit, float]:
        """The limited units and their limits."""
        all_: dict[Unit, float | None] = {
            "calls": self.calls,
            "items": self.items,
            "bytes": self.bytes,
            "money": self.money,
        }
        return {unit: limit for unit, limit in all_.items() if limit is not None}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"per": self.per}
        for unit, limit in self.limits().items():
            out[unit] = limit
        return out

    def __and__(self, other: Budget | Budgets) -> Budgets:
        return Budgets(self) & other


class Budgets:
    """Several budgets that all apply (built with ``&`` or from a list)."""

    __slots__ = ("budgets",)

    def __init__(self, *budgets: Budget) -> None:
        for b in budgets:
            if not isinstance(b, Budget):
                raise ConfigurationError(f"expected a Budget, got {b!r}")
        self.budgets: tuple[Budget, ...] = budgets

    @classmethod
    def of(cls, value: Budget | Budgets | Iterable[Budget] | None) -> Budgets:
        """Normalize what ``Runtime(budgets=...)`` accepts."""
        if value is None:
            return cls()
        if isinstance(value, Budgets):
            return value
        if isinstance(value, Budget):
            return cls(value)
        return cls(*value)

    def __and__(self, other: Budget | Budgets) -> Budgets:
        more = other.budgets if isinstance(other, Budgets) else (other,)
        return Budgets(*self.budgets, *more)

    def __iter__(self) -> Iterator[Budget]:
        return iter(self.budgets)

    def __len__(self) -> int:
        return len(self.budgets)
