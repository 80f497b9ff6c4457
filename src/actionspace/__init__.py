"""actionspace: a runtime between an LLM and the tools it calls.

The model only proposes a call; actionspace decides which tools it may see, checks every
proposal, runs it once, and returns a bounded, typed :class:`Observation` (or a typed
:class:`ActionError` inside it), tracing every decision.
"""

from actionspace.catalog.spec import Cost, Labels, RetryPolicy, ToolSpec
from actionspace.errors import CATEGORIES, ActionError, FieldError, ToolError
from actionspace.execution.result import ToolResult
from actionspace.parse import ParseResult, parse
from actionspace.plan import CancelScope, InvalidPlan, Plan, PlanNode, PlanResult
from actionspace.policy.budget import Budget
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime, tool
from actionspace.types import Effect, Observation, Provenance, ToolCall, Trimming
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

__version__ = "0.1.0"

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
