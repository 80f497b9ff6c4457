from __future__ import annotations

import pytest

from actionspace.errors import CATEGORIES, DEFAULT_RECOVERY, RETRYABLE, ActionError, FieldError, ToolError


def test_every_category_has_a_recovery_entry_and_only_transient_kinds_are_retryable() -> None:
    assert set(DEFAULT_RECOVERY) == set(CATEGORIES)
    assert {c for c in CATEGORIES if ActionError.of(c, "x").retryable} == set(RETRYABLE)
    assert {"transient", "rate_limited"} == RETRYABLE


def test_category_strings_are_the_stable_design_names() -> None:
    assert CATEGORIES == (
        "parse_error",
        "unknown_tool",
        "version_mismatch",
        "invalid_arguments",
        "ambiguous_reference",
        "stale_reference",
        "permission_denied",
        "policy_violation",
        "budget_exceeded",
        "needs_approval",
        "conflict",
        "rate_limited",
        "transient",
        "unknown_commit",
        "permanent",
        "cancelled",
        "unclassified",
        "internal",
    )


def test_unknown_category_is_a_developer_error() -> None:
    with pytest.raises(ValueError, match="unknown error category"):
        ActionError.of("oops", "x")  # type: ignore[arg-type]


def test_action_error_round_trips_through_its_dict() -> None:
    err = ActionError.of(
        "conflict",
        "slot taken",
        alternatives=[{"start": "2026-12-01T16:00:00+08:00"}],
        field_errors=[FieldError(path="/start", message="busy")],
        candidates=[{"id": "t1"}],
        current_version="v3",
        resource_ids=["calendar:c1"],
        vendor_code="E409",
        details={"k": 1},
    )
    assert ActionError.from_dict(err.to_dict()) == err


def test_tool_error_carries_a_categorized_action_error() -> None:
    exc = ToolError("rate_limited", "slow down", retry_after=2.0)
    assert exc.error.category == "rate_limited"
    assert exc.error.retryable is True
    assert exc.error.retry_after == 2.0
    assert exc.error.recovery == DEFAULT_RECOVERY["rate_limited"]
