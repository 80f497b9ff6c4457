"""The items of a batch call: their keys, the checks on them, their count and their approval preview.

A batch tool (``ToolSpec.batch``) takes a list of items in one argument (``ToolSpec.items_arg``).
Each item is identified by a key: the item's ``"id"`` field, else its ``"key"`` field, when it is
an object that has one holding a string or an integer; otherwise its index in the list, as a
string. Keys name items in observations, in ``failed_items`` and in idempotency keys, so two items
of one call never share a key.

The items are checked at validation (:func:`check_items`, :func:`batch_verdict`), so this module
lives there; budgets count them (:func:`count_items`) and approval previews them
(:func:`preview_items`), which a lower layer than execution must be able to import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, FieldError
from actionspace.validation.verdicts import Rejected, Verdict

__all__ = [
    "batch_verdict",
    "check_items",
    "count_items",
    "item_key",
    "item_keys",
    "items_of",
    "preview_items",
]

_KEY_FIELDS = ("id", "key")


def item_key(item: Any, index: int) -> str:
    """The key of ``item`` at position ``index`` (see the module docstring)."""
    if isinstance(item, Mapping):
        for name in _KEY_FIELDS:
            value = item.get(name)
            if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
                return str(value)
    return str(index)


def items_of(spec: ToolSpec, arguments: Mapping[str, Any]) -> list[Any] | None:
    """The call's list of items, or None when ``items_arg`` is missing or not a list."""
    value = arguments.get(spec.items_arg)
    return value if isinstance(value, list) else None


def item_keys(items: Sequence[Any]) -> list[str]:
    """The key of every item, in order."""
    return [item_key(item, i) for i, item in enumerate(items)]


def count_items(spec: ToolSpec, arguments: Mapping[str, Any]) -> int:
    """How many items a call carries, for budgets that meter items.

    A batch tool's call counts the items in its list (0 when the list is missing); a tool that names
    ``items_from`` counts that list argument's length; any other call counts as one item.
    """
    if spec.batch is None:
        if spec.items_from is not None:
            listed = arguments.get(spec.items_from)
            return len(listed) if isinstance(listed, list | tuple) else 1
        return 1
    items = items_of(spec, arguments)
    return len(items) if items is not None else 0


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def check_items(spec: ToolSpec, arguments: Mapping[str, Any]) -> ActionError | None:
    """``invalid_arguments`` when the items break ``max_items`` or share a key; else None.

    Applies to batch tools and to any tool with ``max_items``; a non-batch tool without the
    ``items_arg`` argument is not checked.
    """
    name = spec.items_arg
    raw = arguments.get(name)
    if not isinstance(raw, list):
        if spec.batch is None:
            return None
        return ActionError.of(
            "invalid_arguments",
            f"a batch call needs its items as a list in {name!r}",
            field_errors=[FieldError(path=_pointer(name), message="expected a list of items")],
        )
    if spec.max_items is not None and len(raw) > spec.max_items:
        return ActionError.of(
            "invalid_arguments",
            f"{len(raw)} items exceed the limit of {spec.max_items} per call; split the batch",
            field_errors=[
                FieldError(
                    path=_pointer(name), message=f"at most {spec.max_items} items per call, got {len(raw)}"
                )
            ],
            details={"max_items": spec.max_items, "items": len(raw)},
        )
    if spec.batch is None:
        return None
    return _duplicates(name, raw)


def _duplicates(name: str, items: Sequence[Any]) -> ActionError | None:
    seen: dict[str, list[int]] = {}
    for i, key in enumerate(item_keys(items)):
        seen.setdefault(key, []).append(i)
    shared = {key: where for key, where in seen.items() if len(where) > 1}
    if not shared:
        return None
    errors = [
        FieldError(
            path=_pointer(name, str(i)),
            message=f"item key {key!r} is shared by items {', '.join(map(str, where))}",
        )
        for key, where in shared.items()
        for i in where
    ]
    listed = "; ".join(f"{key!r} (items {', '.join(map(str, where))})" for key, where in shared.items())
    return ActionError.of(
        "invalid_arguments",
        f"every item needs a distinct key ('id' or 'key' field, else its index); duplicated: {listed}",
        field_errors=errors,
        details={"duplicate_keys": shared},
    )


def batch_verdict(spec: ToolSpec, arguments: Mapping[str, Any], verdict: Verdict) -> Verdict:
    """``verdict``, or a rejection when :func:`check_items` finds the items invalid."""
    if isinstance(verdict, Rejected):
        return verdict
    error = check_items(spec, arguments)
    return verdict if error is None else Rejected(error)


def preview_items(spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What an approval request of a batch call adds to its details: every item with its key.

    ``{"items": [{"key", "item", "writes"}...]}`` where ``writes`` are the tool's ``writes``
    templates filled from the call's arguments and the item's own fields; ``{}`` for other tools.
    """
    if spec.batch is None:
        return {}
    items = items_of(spec, arguments) or []
    out = []
    for key, item in zip(item_keys(items), items, strict=True):
        fields = {**arguments, **item} if isinstance(item, Mapping) else dict(arguments)
        out.append({"key": key, "item": item, "writes": [_fill(t, fields) for t in spec.writes]})
    return {"items": out}


def _fill(template: str, fields: Mapping[str, Any]) -> str:
    try:
        return template.format(**fields)
    except (KeyError, IndexError, ValueError, AttributeError):
        return template
