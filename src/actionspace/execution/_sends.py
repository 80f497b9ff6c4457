"""Whether a write's first send began, decided once, under one lock, between its caller and a close.

``Runtime.close()`` notes ``unknown`` only writes that may have been sent (DESIGN §6); a write
never sent is withdrawn instead (it ends ``cancelled``, ``details["sent"]`` False). Reading "has
it been sent?" and acting on it from two threads is a race unless one object decides, so each
write the ledger driver sends carries a :class:`SendGate`, registered before its caller reads
``Executor.closed``: the caller :meth:`~SendGate.opens` it to send (refused once the runtime
closed), and the close :meth:`~SendGate.withdraw` s it (refused once the send began). Whichever
comes first wins; neither can land between the other's read and its act.

A blocking tool's first attempt may wait in the worker pool's queue behind busy workers: its
caller has handed it over, yet nothing was sent. The gate of such a write stays withdrawable until
a worker thread begins it (:func:`gated`): the executor registers the queued attempt on the gate
of the send under way (:data:`SENDING`, set by the ledger driver around its dispatch), and a close
that withdraws the gate cancels that attempt, or, when a worker took it meanwhile, the worker
finds the gate withdrawn and returns :data:`WITHDRAWN` without calling the tool. An async caller
that cancels its own task meanwhile withdraws the gate the same way (``LedgerDriver._drive``): its
write was never sent, so it ends ``failed`` (``cancelled``, not sent), never ``unknown``.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Final

from actionspace.execution.raised import call_carrying

__all__ = ["SENDING", "WITHDRAWN", "SendGate", "gated"]

_ARMED, _QUEUED, _BEGUN, _WITHDRAWN = "armed", "queued", "begun", "withdrawn"


class _Withdrawn:
    """The type of :data:`WITHDRAWN`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "WITHDRAWN"


WITHDRAWN: Final = _Withdrawn()
"""What a worker thread answers for an attempt whose gate was withdrawn before it began: the tool
was not called."""

SENDING: contextvars.ContextVar[SendGate | None] = contextvars.ContextVar("actionspace_sending", default=None)
"""The gate of the write whose dispatch runs in this context (None: no gated send)."""


class SendGate:
    """``armed`` (registered, nothing sent) → ``begun`` (the tool may run: a close notes it
    ``unknown``) or ``withdrawn`` (it never runs: it ends not sent); ``queued`` while a blocking
    first attempt waits for a worker thread, which is still withdrawable."""

    __slots__ = ("_closed", "_lock", "_queued", "_state")

    def __init__(self, closed: Callable[[], bool]) -> None:
        self._closed = closed
        self._lock = threading.RLock()  # re-entered when a close runs inside ``closed`` itself
        self._state = _ARMED
        self._queued: Future[Any] | None = None

    @property
    def begun(self) -> bool:
        """The send began (a tool may have run): it cannot be withdrawn any more."""
        return self._state == _BEGUN

    @property
    def withdrawn(self) -> bool:
        """It was withdrawn: the tool was not, and will not be, called under it."""
        return self._state == _WITHDRAWN

    def opens(self, *, deferred: bool) -> bool:
        """The caller is about to dispatch: False (withdrawn, nothing sent) when the runtime closed
        or a close withdrew it first. ``deferred``: the dispatch hands its first attempt to the
        worker pool, whose thread begins it (:meth:`queue`, :func:`gated`); else it begins now."""
        with self._lock:
            if self._state == _BEGUN:
                return True
            shut = self._closed()  # read under the lock: a close withdrawing now waits for it
            if shut or self._state == _WITHDRAWN:
                self._state = _WITHDRAWN
                return False
            if not deferred:
                self._state = _BEGUN
            return True

    def queue(self, submit: Callable[[], Future[Any]]) -> Future[Any] | None:
        """``submit()``'s attempt, registered as waiting for a worker (withdrawable until one takes
        it); None, nothing submitted, when the gate was withdrawn or, its send not begun, the
        runtime closed."""
        with self._lock:
            if self._state == _WITHDRAWN or (self._state != _BEGUN and self._closed()):
                self._state = _WITHDRAWN  # nothing sent, and nothing begins once the runtime closed
                return None
            fut = submit()
            if self._state != _BEGUN:  # a later attempt (after one began) is no first send
                self._state, self._queued = _QUEUED, fut
            return fut

    def start(self) -> bool:
        """On the worker thread, before the tool is called: False (it is withdrawn now) when the gate
        was withdrawn or, its send not begun, the runtime closed."""
        with self._lock:
            if self._state == _WITHDRAWN or (self._state != _BEGUN and self._closed()):
                self._state = _WITHDRAWN
                return False
            self._state, self._queued = _BEGUN, None
            return True

    def withdraw(self) -> bool:
        """Withdraw the send unless it began: True when it never runs (its queued attempt, if
        any, cancelled), False when it began."""
        with self._lock:
            if self._state == _BEGUN:
                return False
            self._state = _WITHDRAWN
            queued, self._queued = self._queued, None
        if queued is not None:
            queued.cancel()  # a worker that took it meanwhile finds the gate withdrawn (gated)
        return True


def gated(gate: SendGate, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """A blocking attempt on its worker thread: the tool's value, or :data:`WITHDRAWN` (the tool
    not called) when ``gate`` was withdrawn while the attempt waited in the queue."""
    if not gate.start():
        return WITHDRAWN
    return call_carrying(fn, kwargs)
