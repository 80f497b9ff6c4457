"""The public names are a promise: this list changes only deliberately."""

from __future__ import annotations

import actionspace

PUBLIC = [
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


def test_public_names_are_exactly_the_promised_ones() -> None:
    assert sorted(actionspace.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(actionspace, name), name


def test_the_design_facade_names_are_importable() -> None:
    from actionspace import ActionError, Observation, Principal, Runtime, ToolCall, parse, tool

    assert all(x is not None for x in (Runtime, tool, Principal, ToolCall, Observation, ActionError, parse))
