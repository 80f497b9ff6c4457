"""What a proposal's arguments may hold: JSON values, whole text, bounded nesting.

Arguments read from JSON text are JSON values by construction, but a provider SDK's objects and a
caller's own ``ToolCall`` hand the runtime Python objects, which may hold anything: a set, bytes,
a key that is not a string, NaN or an infinity, an integer of thousands of digits, nesting deeper
than the interpreter's stack. None of these has a canonical JSON form (RFC 8785), so no argument
digest, idempotency key or node identity can be made of them, and no store can keep them.
:func:`unfit_arguments` finds the first such value and says where it is; the validate stage
refuses the call as ``invalid_arguments`` naming that field, before anything else reads the
arguments (the text checks of :mod:`actionspace._unicode` are part of the same walk).

The bounds are those of the JSON text parsers: nesting as deep as ``pydantic_core.from_json``
reads (200 levels, the arguments object itself the first), integers of as many digits as Python
writes back as text (4,300). Text nested deeper fails that parser and takes the stages, which
refuse it here, so a call ends the same way whichever path read it.
"""

from __future__ import annotations

import math
from typing import Any, Final

from actionspace._unicode import _bad, _escape_pointer, text_for_postgres

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "finite_numbers", "unfit_arguments"]

MAX_DEPTH: Final = 200
"""Most levels of objects and arrays arguments may nest (the arguments object is level 1)."""
MAX_INT_DIGITS: Final = 4300
"""Most decimal digits of an integer argument (Python's limit for writing an integer as text)."""
_TOO_BIG: Final = 10**MAX_INT_DIGITS


def unfit_arguments(value: Any) -> tuple[str, str, bool] | None:
    """(JSON pointer, reason, whether it is text) of the first part of ``value`` arguments may not
    hold, else None: a string or key :func:`~actionspace._unicode.unfit_text` refuses, a key that
    is not a string, a value that is not JSON (JSON's types, and tuples as arrays), a number that
    is not finite, an integer beyond :data:`MAX_INT_DIGITS` digits, nesting deeper than
    :data:`MAX_DEPTH`. Walks each container once, without recursion."""
    if type(value) is dict:  # the usual arguments: ASCII keys, small scalars and ASCII strings
        for key, child in value.items():
            if type(key) is not str or not key.isascii() or "\x00" in key:
                break
            kind = type(child)
            if kind is str:
                if not child.isascii() or "\x00" in child:
                    break
            elif kind is int:
                if not -_TOO_BIG < child < _TOO_BIG:
                    break
            elif kind is float:
                if child - child != 0.0:  # NaN or an infinity
                    break
            elif kind is not bool and child is not None:
                break
        else:
            return None
    return _walk(value)


def _walk(value: Any) -> tuple[str, str, bool] | None:
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    path: set[int] = set()  # the containers holding the one being walked
    while stack:
        item, where, depth = stack.pop()
        if item is _LEAVE:
            path.discard(depth)  # the marker carries the container's id
            continue
        problem = _scalar(item)
        if problem is not None:
            return where, problem, False
        if isinstance(item, str):
            reason = _bad(item)
            if reason is not None:
                return where, reason, True
            continue
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, list | tuple):
            pairs = enumerate(item)
        else:
            continue
        if depth >= MAX_DEPTH:
            return where, f"nests objects and arrays deeper than {MAX_DEPTH} levels", False
        if id(item) in path:
            return where, "holds itself (a container inside itself has no JSON form)", False
        path.add(id(item))
        stack.append((_LEAVE, where, id(item)))
        for key, child in pairs:
            if isinstance(item, dict):
                if not isinstance(key, str):
                    return where, f"has a key that is not a string ({type(key).__name__} {key!r:.40})", False
                reason = _bad(key)
                if reason is not None:
                    return f"{where}/{_escape_pointer(text_for_postgres(key))}", f"the key {reason}", True
            stack.append((child, f"{where}/{_escape_pointer(str(key))}", depth + 1))
    return None


_LEAVE: Final = object()
"""Marks, on the walk's stack, the end of a container's children."""


def _scalar(item: Any) -> str | None:
    """Why a value that is not a container or text may not be in arguments, or None."""
    if item is None or isinstance(item, str | bool | dict | list | tuple):
        return None
    if isinstance(item, int):
        if -_TOO_BIG < item < _TOO_BIG:
            return None
        return f"is an integer of more than {MAX_INT_DIGITS} digits"
    if isinstance(item, float):
        return None if math.isfinite(item) else f"is {item!r}, not a finite number: JSON has none such"
    return f"is a {type(item).__name__}, not a JSON value"


def finite_numbers(value: Any) -> bool:
    """Whether every number in ``value`` (parsed JSON: dicts, lists and scalars) is finite; the one
    check :func:`unfit_arguments` makes that JSON text parsed without escapes still needs (a
    literal such as ``1e999`` reads as an infinity)."""
    if type(value) is dict:
        for child in value.values():
            kind = type(child)
            if kind is float:
                if child - child != 0.0:
                    return False
            elif kind is dict or kind is list:
                break
        else:
            return True
    return _walk(value) is None
