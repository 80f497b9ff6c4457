from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from actionspace import errors
from actionspace.errors import CATEGORIES, DEFAULT_RECOVERY, RETRYABLE, ActionError, FieldError, ToolError

SRC = Path(errors.__file__).resolve().parent
EXCEPTIONS = sorted(
    name
    for name in errors.__all__
    if isinstance(getattr(errors, name), type) and issubclass(getattr(errors, name), BaseException)
)


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


def test_every_exception_a_user_may_catch_derives_from_actionspace_error() -> None:
    # ToolError is raised by tools, to us; Abandoned is thrown into a commit protocol by its driver
    # and caught there again (pipeline/commit.py), never raised at a user
    caught = [name for name in EXCEPTIONS if name not in ("ToolError", "Abandoned")]
    assert [name for name in caught if not issubclass(getattr(errors, name), errors.ActionspaceError)] == []


def test_the_module_docstring_draws_every_exception() -> None:
    assert errors.__doc__ is not None
    assert [name for name in EXCEPTIONS if f" {name} " not in errors.__doc__] == []


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("actionspace", "InvalidPlan"),
        ("actionspace.plan.model", "InvalidPlan"),
        ("actionspace.plan.refs", "RefError"),
        ("actionspace.trace.store", "StoreNotFoundError"),
        ("actionspace.evaluation.suite", "SuiteError"),
        ("actionspace.evaluation._bfcl_data", "BfclDataError"),
        ("actionspace.evaluation.bfcl", "BfclAnswerError"),
        ("actionspace.evaluation._policy_http", "PolicyHTTPError"),
        ("actionspace.service.errors", "ApiError"),
    ],
)
def test_exceptions_are_reexported_where_they_are_raised(module: str, name: str) -> None:
    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def _defines_an_exception(node: ast.ClassDef) -> bool:
    names = [
        b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
        for b in node.bases
    ]
    return any(n.endswith(("Error", "Exception")) or n in ("Exception", "BaseException") for n in names)


def test_no_public_module_defines_an_exception_of_its_own() -> None:
    """Private helpers may (``_TooBig``, a parser's ``Malformed``); the demo's simulated vendors raise
    their own errors, as a real vendor would, for its tools to map."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts == ("errors",) or parts[0] == "demo":
            continue
        if any(part.startswith("_") and part != "__init__" for part in parts):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and _defines_an_exception(node)
            ):
                found.append(f"{'/'.join(parts)}.py: {node.name}")
    assert found == []


def test_a_store_that_did_not_answer_is_told_from_a_failure_of_ours() -> None:
    import sqlite3

    import psycopg
    import psycopg_pool

    from actionspace.errors import store_unavailable

    assert store_unavailable(sqlite3.OperationalError("database is locked"))
    assert store_unavailable(sqlite3.OperationalError("database table is locked: ledger_entries"))
    assert store_unavailable(sqlite3.OperationalError("disk I/O error"))
    assert store_unavailable(psycopg.OperationalError("server closed the connection unexpectedly"))
    assert store_unavailable(psycopg_pool.PoolTimeout("couldn't get a connection after 30.00 sec"))
    assert not store_unavailable(sqlite3.OperationalError("no such table: ledger_entries"))  # a bug
    assert not store_unavailable(sqlite3.IntegrityError("UNIQUE constraint failed"))
    assert not store_unavailable(psycopg.errors.UndefinedTable("relation does not exist"))
    assert not store_unavailable(ValueError("database is locked"))
