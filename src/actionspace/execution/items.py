"""The items of a batch call: defined in :mod:`actionspace.validation.items`, kept here for imports."""

from __future__ import annotations

from actionspace.validation.items import (
    batch_verdict,
    check_items,
    count_items,
    item_key,
    item_keys,
    items_of,
    preview_items,
)

__all__ = [
    "batch_verdict",
    "check_items",
    "count_items",
    "item_key",
    "item_keys",
    "items_of",
    "preview_items",
]
