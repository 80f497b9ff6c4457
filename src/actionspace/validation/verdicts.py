"""Stage results as tagged unions: what validation and authorization can answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.errors import ActionError

__all__ = ["Accepted", "NeedsApproval", "Rejected", "Verdict"]


@dataclass(frozen=True, slots=True)
class Accepted:
    """The call may proceed to the next stage."""


@dataclass(frozen=True, slots=True)
class Rejected:
    """The call must not run; ``error`` says why and what recovery is allowed."""

    error: ActionError


@dataclass(frozen=True, slots=True)
class NeedsApproval:
    """The call is legal but a human must confirm it first."""

    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)


Verdict = Accepted | Rejected | NeedsApproval

ACCEPTED = Accepted()
