"""The SQLite writer and its flusher thread keep out of each other's private fields.

The lend of the writer to the flusher (``_flusher.Lend``: whether the flusher waits to be lent it,
where a lend stands, the lock released when the flusher's transaction ended, the flusher itself) is
an object the writer owns and hands to the flusher; the flusher asks everything else of the writer
through its ``Lender`` methods. The code before read and set the writer's ``_lock``, ``_flusher``,
``_due``, ``_lend``, ``_lent``, ``_armed``, ``_queue``, ``_detached`` and ``_pid`` from the flusher's
module.
"""

from __future__ import annotations

import ast
import inspect

from actionspace.ledger import _flusher, sqlite_writer


def _private_reads(module: object, owners: set[str] | None) -> list[str]:
    """``name._field`` accesses in ``module``'s source: of any name but ``self`` when ``owners`` is
    None, else of the names in ``owners`` and of ``self.<owner>``."""
    found = []
    for node in ast.walk(ast.parse(inspect.getsource(module))):  # type: ignore[arg-type]
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        if node.attr.startswith("__"):
            continue
        value = node.value
        if owners is None:
            if not (isinstance(value, ast.Name) and value.id == "self"):
                found.append(f"{ast.unparse(value)}.{node.attr}")
        elif (isinstance(value, ast.Name) and value.id in owners) or (
            isinstance(value, ast.Attribute) and value.attr.lstrip("_") in owners
        ):
            found.append(f"{ast.unparse(value)}.{node.attr}")
    return found


def test_the_flusher_reads_no_private_field_of_its_writer() -> None:
    assert _private_reads(_flusher, None) == []


def test_the_writer_reads_no_private_field_of_its_flusher_or_lend() -> None:
    assert _private_reads(sqlite_writer, {"flusher", "lend"}) == []
