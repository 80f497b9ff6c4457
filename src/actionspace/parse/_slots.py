"""Which call each provider event of a stream adds to, and the calls in the message's order.

A call is kept under ``(family, index)``: a chat call's ``index``, a Responses item's
``output_index``, an Anthropic block's ``index``. Servers bend that: some number every chat call
``0`` (or give none an index) and some give every Responses item one ``output_index`` (or none),
each call still beginning with an id of its own; a proxy may interleave or reorder the calls'
events. Each call stays apart (spliced into one, the first call's id would go unanswered and the
provider would refuse the next request), and :meth:`Slots.in_message_order` reads them by index,
the order the message holds them in and its calls run in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actionspace.parse._progress import Pending

__all__ = ["Key", "Slots"]

Key = tuple[str, int]
"""``(family, index)`` of a call being assembled."""


class Slots:
    """The calls a stream of provider events assembles, by :data:`Key`, in arrival order."""

    def __init__(self) -> None:
        self.pending: dict[Key, Pending] = {}
        self.order: list[Key] = []
        """Keys in the order their calls began."""
        self._chat_top = -1
        """The highest index of a chat tool call seen: a higher one completes those below it."""
        self._chat_open: dict[int, Pending] = {}
        """Chat calls by index that a higher index has not completed yet."""
        self._chat_keys: dict[int, int] = {}
        """Chat index → the slot its entries add to, where a new call id began a new call there."""
        self._chat_last = -1
        self._key_items: dict[Key, str] = {}
        """Responses slot → the item id that began it."""
        self._item_keys: dict[str, Key] = {}
        """Responses item id → the slot begun for it after the others (its index held by another)."""
        self._items_top = -1
        self._choice: int | None = None
        """The chat candidate (choice ``index``) read: the first met; other candidates' chunks
        (a request for ``n`` > 1) are left out, never merged into its message."""

    def chosen(self, choices: list[Any]) -> Mapping[str, Any] | None:
        """A chat chunk's choice of the candidate the stream reads: the first one it met, as a
        completion of several choices is read as its first. None when it holds none of it."""
        for choice in choices:
            if not isinstance(choice, Mapping):
                continue
            index = choice.get("index", 0)
            index = index if type(index) is int else 0
            if self._choice is None:
                self._choice = index
            if index == self._choice:
                return choice
        return None

    def slot(self, family: str, index: int) -> Pending:
        """The call at ``(family, index)``, begun when none is there yet."""
        key = (family, index)
        pending = self.pending.get(key)
        if pending is None:
            pending = self.pending[key] = Pending()
            self.order.append(key)
        return pending

    def in_message_order(self) -> list[Key]:
        """The keys by index (a proxy may have begun a later call first); those of one index keep
        their arrival order."""
        return sorted(self.order, key=lambda key: key[1])

    def chat(self, index: int, call_id: object, head: object) -> Pending:
        """The call a chat entry at ``index`` adds to; a higher index than any before completes
        the calls still open below it. A new call when the entry names a tool under another
        ``call_id`` than the index holds (servers that number every call 0, or none, begin each
        call with its name and an id of its own; an id changed on a piece of arguments begins none)."""
        if index > self._chat_top:
            self._chat_top = index
            for i in [i for i in self._chat_open if i < index]:
                self._chat_open.pop(i).done = True
        at = self._chat_keys.get(index, index)
        slot = self.pending.get(("chat", at))
        named = isinstance(head, Mapping) and isinstance(head.get("name"), str) and head["name"]
        call_id = call_id or None  # an empty id (TGI streams "") names no call, as in a whole message
        if slot is not None and named and slot.name and isinstance(call_id, str) and slot.call_id != call_id:
            slot.done = True  # a call that began after it completes it
            self._chat_open.pop(index, None)
            at = self._chat_keys[index] = self._chat_last = max(self._chat_last, self._chat_top) + 1
        slot = self.slot("chat", at)
        if not slot.done:
            self._chat_open.setdefault(index, slot)
        if isinstance(call_id, str):
            slot.call_id = call_id
        return slot

    def item(self, index: int, item_id: object) -> Pending:
        """The call a Responses event adds to: the one at its ``output_index``, unless another
        item's ``id`` holds that index; then the one its own ``id`` (an argument event's
        ``item_id``) began, or a new one after the others."""
        self._items_top = max(self._items_top, index)
        key = ("responses", index)
        if isinstance(item_id, str) and self._key_items.setdefault(key, item_id) != item_id:
            key = self._item_keys.get(item_id) or self._new_item(item_id)
        return self.slot(*key)

    def _new_item(self, item_id: str) -> Key:
        self._items_top += 1
        key = ("responses", self._items_top)
        self._key_items[key], self._item_keys[item_id] = item_id, key
        return key
