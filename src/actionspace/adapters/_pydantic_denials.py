"""Pydantic AI: a call the person denies with Pydantic AI's own ``DeferredToolResults`` (``False``
or ``ToolDenied``, without ``GovernedToolset.decide``) is denied in ``rt.approvals`` too.

Pydantic AI never calls the tool of a denied call: it writes the denial into the message history
as a ``ToolReturnPart`` of outcome ``"denied"`` and asks the model again. So a call deferred for
approval marks its request with ``<conversation>:<tool call id>`` (:data:`DEFERRED`), and the
toolset, whose tools Pydantic AI lists before each model request with the run's messages, denies
the requests whose calls of the conversation were all denied there
(:func:`~actionspace.adapters._marks.refuse`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Final

from actionspace.adapters._bridge import Bridge
from actionspace.adapters._marks import mark, refuse

__all__ = ["DEFERRED", "Denials", "deferred"]

DEFERRED: Final = "pydantic_ai_deferred"
"""Key of a request's ``details`` listing the calls (``<conversation>:<tool call id>``) deferred on it."""

_DEFAULT_DENIAL: Final = "The tool call was denied."
"""What Pydantic AI tells the model of a denial given without words (``ToolDenied().message``): not
the person's reason."""

_DONE: Final = 4096
"""How many denied calls a toolset remembers having settled (each is looked up again past that)."""


def deferred(bridge: Bridge, request_id: str, conversation: str | None, call_id: str | None) -> None:
    """Mark the pending request ``request_id`` as deferred for call ``call_id`` of ``conversation``.
    Blocking; never raises: a mark the store fails to take is written again before the run's
    denials are next read, in this process (adapters/_marks.py); else the request is left pending by
    a denial given in Pydantic AI alone (decide it in ``rt.approvals``)."""
    if call_id is None:
        return
    mark(bridge, request_id, DEFERRED, f"{conversation or ''}:{call_id}", bridge.session.run_id)


class Denials:
    """The denied calls one toolset has settled, and :meth:`settle` for a run's messages."""

    def __init__(self) -> None:
        self._done: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def fresh(self, run_id: str, conversation: str | None, messages: Sequence[Any]) -> bool:
        """Whether ``messages`` hold a denial not settled yet for run ``run_id``."""
        denied, _, _ = _read(messages)
        with self._lock:
            return any((run_id, f"{conversation or ''}:{c}") not in self._done for c in denied)

    def settle(self, bridge: Bridge, run_id: str, conversation: str | None, messages: Sequence[Any]) -> None:
        """Deny the pending requests of run ``run_id`` whose calls of ``conversation`` were all
        denied in ``messages``. Blocking (store I/O); best effort."""
        denied, decisions, reasons = _read(messages)
        key = conversation or ""
        with self._lock:
            new = [c for c in denied if (run_id, f"{key}:{c}") not in self._done]
        if not new or not refuse(bridge, run_id, DEFERRED, key, decisions, reasons):
            return
        with self._lock:
            self._done.update(dict.fromkeys((run_id, f"{key}:{c}") for c in new))
            while len(self._done) > _DONE:
                self._done.popitem(last=False)


def _read(messages: Sequence[Any]) -> tuple[list[str], dict[str, bool | None], dict[str, str | None]]:
    """The calls denied in ``messages``, each answered call's decision (denied: False; returned
    or retried: True) and each denied call's reason (None for Pydantic AI's default words)."""
    denied: list[str] = []
    decisions: dict[str, bool | None] = {}
    reasons: dict[str, str | None] = {}
    for message in messages:
        for part in getattr(message, "parts", ()):
            if getattr(part, "part_kind", None) not in ("tool-return", "retry-prompt"):
                continue
            call_id = getattr(part, "tool_call_id", None)
            if not isinstance(call_id, str):
                continue
            if getattr(part, "outcome", None) == "denied":
                denied.append(call_id)
                decisions[call_id] = False
                content = getattr(part, "content", None)
                reasons[call_id] = (
                    content if isinstance(content, str) and content != _DEFAULT_DENIAL else None
                )
            else:  # went to the tool: approved, or never deferred (a denial of the same id wins)
                decisions.setdefault(call_id, True)
    return denied, decisions, reasons
