"""The exception mapper the executor is handed, and the mapping for plain Python tools.

The executor never decides what an exception means: it applies the :class:`ErrorMapper` it was
given. :func:`map_exception` is the Python-function tools' mapping (the runtime hands it to its
executor; ``actionspace.adapters.python`` re-exports it). It is deliberately small: what is not
known for sure is ``unclassified`` (never retried), not "transient for convenience".
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from actionspace.errors import ActionError, Category, ToolError

__all__ = ["KNOWN_EXCEPTIONS", "ErrorMapper", "map_exception"]


class ErrorMapper(Protocol):
    """Maps an exception a tool raised to its ``ActionError``.

    ``side_effects`` is True for tools that write or leave the system, where an interrupted call
    may have committed (so a mapper answers ``unknown_commit`` rather than ``transient``).
    """

    def __call__(self, exc: BaseException, *, side_effects: bool) -> ActionError: ...


KNOWN_EXCEPTIONS: tuple[tuple[type[BaseException], Category, Category], ...] = (
    # Refused before anything was sent: nothing can have been committed.
    (ConnectionRefusedError, "transient", "transient"),
    # Broken mid-way: a write may or may not have landed.
    (ConnectionError, "transient", "unknown_commit"),
    (TimeoutError, "transient", "unknown_commit"),
    (PermissionError, "permission_denied", "permission_denied"),
    (asyncio.CancelledError, "cancelled", "unknown_commit"),
)
"""(exception type, category for pure/read tools, category for side-effecting tools); first match wins."""


def map_exception(exc: BaseException, *, side_effects: bool) -> ActionError:
    """The ActionError for an exception a Python tool raised (its class name kept as ``vendor_code``).

    ``ToolError`` keeps its own error; :data:`KNOWN_EXCEPTIONS` map by type; anything else is
    ``unclassified``.
    """
    if isinstance(exc, ToolError):
        return exc.error
    vendor = type(exc).__name__
    message = str(exc)[:500] or vendor
    for exc_type, read_category, write_category in KNOWN_EXCEPTIONS:
        if isinstance(exc, exc_type):
            category = write_category if side_effects else read_category
            return ActionError.of(category, message, vendor_code=vendor)
    return ActionError.of(
        "unclassified",
        f"{vendor}: {message}",
        vendor_code=vendor,
        details={"exception": vendor},
    )
