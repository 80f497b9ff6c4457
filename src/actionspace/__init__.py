"""actionspace: a runtime between an LLM and the tools it calls.

The model only proposes a call; actionspace decides which tools it may see, checks every
proposal, runs it once, and returns a bounded, typed :class:`Observation` (or a typed
:class:`ActionError` inside it), tracing every decision.

The names below are imported on first use, so ``import actionspace.errors`` (or any other light
module) does not load the runtime and its dependencies.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

# Eager: light, and ``parse`` must stay the function, not the ``actionspace.parse`` subpackage.
from actionspace.errors import CATEGORIES, ActionError, FieldError, ToolError
from actionspace.outcomes import ToolResult
from actionspace.parse import ParseResult, parse
from actionspace.types import Effect, Observation, Provenance, ToolCall, Trimming

if TYPE_CHECKING:
    from actionspace.catalog.spec import Cost, Labels, RetryPolicy, ToolSpec
    from actionspace.plan import CancelScope, InvalidPlan, Plan, PlanNode, PlanResult
    from actionspace.policy.budget import Budget
    from actionspace.policy.principal import Principal
    from actionspace.runtime import Runtime, tool
    from actionspace.validation.semantic import (
        URL,
        Currency,
        Money,
        PathWithin,
        ResourceKind,
        ResourceRef,
        Timestamp,
        UrlRule,
    )
    from actionspace.validation.validator import ValidationContext, after
    from actionspace.validation.verdicts import Accepted, NeedsApproval, Rejected

    __version__: str

_LAZY: Final[dict[str, str]] = {
    "Cost": "actionspace.catalog.spec",
    "Labels": "actionspace.catalog.spec",
    "RetryPolicy": "actionspace.catalog.spec",
    "ToolSpec": "actionspace.catalog.spec",
    "CancelScope": "actionspace.plan",
    "InvalidPlan": "actionspace.plan",
    "Plan": "actionspace.plan",
    "PlanNode": "actionspace.plan",
    "PlanResult": "actionspace.plan",
    "Budget": "actionspace.policy.budget",
    "Principal": "actionspace.policy.principal",
    "Runtime": "actionspace.runtime",
    "tool": "actionspace.runtime",
    "URL": "actionspace.validation.semantic",
    "Currency": "actionspace.validation.semantic",
    "Money": "actionspace.validation.semantic",
    "PathWithin": "actionspace.validation.semantic",
    "ResourceKind": "actionspace.validation.semantic",
    "ResourceRef": "actionspace.validation.semantic",
    "Timestamp": "actionspace.validation.semantic",
    "UrlRule": "actionspace.validation.semantic",
    "ValidationContext": "actionspace.validation.validator",
    "after": "actionspace.validation.validator",
    "Accepted": "actionspace.validation.verdicts",
    "NeedsApproval": "actionspace.validation.verdicts",
    "Rejected": "actionspace.validation.verdicts",
}
"""Public name → the module that defines it, imported when the name is first read."""

__all__ = [
    "CATEGORIES",
    "URL",
    "Accepted",
    "ActionError",
    "Budget",
    "CancelScope",
    "Cost",
    "Currency",
    "Effect",
    "FieldError",
    "InvalidPlan",
    "Labels",
    "Money",
    "NeedsApproval",
    "Observation",
    "ParseResult",
    "PathWithin",
    "Plan",
    "PlanNode",
    "PlanResult",
    "Principal",
    "Provenance",
    "Rejected",
    "ResourceKind",
    "ResourceRef",
    "RetryPolicy",
    "Runtime",
    "Timestamp",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Trimming",
    "UrlRule",
    "ValidationContext",
    "__version__",
    "after",
    "parse",
    "tool",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from actionspace._version import package_version

        value: Any = package_version()
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'actionspace' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
