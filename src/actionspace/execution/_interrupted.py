"""A sync caller interrupted while it hands a blocking attempt to the worker pool or waits for it.

A signal handler runs between two bytecodes of the main thread, and a wait on a lock lets it run:
a Ctrl-C can land once the attempt was queued and before the caller holds its future, or while
the caller waits for it. The interruption goes on up (``KeyboardInterrupt``, ``SystemExit``:
:func:`~actionspace.execution.raised.passes_on`), and the attempt is settled as a cancelled async
caller's is: the send of a write under way (:data:`~actionspace.execution._sends.SENDING`) is
withdrawn unless a worker began it, and the executor notes on the interruption the attempt's
outcome (:func:`~actionspace.execution.executor.running_attempt`): withdrawn, it never runs;
begun, its outcome is written to the ledger when it ends. Else an attempt no worker had begun
would run after its caller was told it was interrupted, and one that ran would leave its entry
``unknown`` with its key not held as still running (the same action could be sent again beside it).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from actionspace.execution._sends import SENDING
from actionspace.execution.raised import passes_on

__all__ = ["interrupted"]


def interrupted(cut: BaseException, fut: Future[Any] | None = None) -> bool:
    """Whether the executor notes an attempt on ``cut``, raised in the caller's thread while it
    handed the attempt over (``fut`` None: its future never reached the caller) or waited for
    ``fut``: True when ``cut`` is an interruption, not what the tool raised, and either ``fut`` is
    known or the send under way was withdrawn (it never runs). An interruption withdraws the send
    under way unless a worker began it (a worker taking its attempt then finds it withdrawn)."""
    if not passes_on(cut, in_task=False):
        return False
    if fut is not None and fut.done() and not fut.cancelled() and fut.exception() is cut:
        return False  # the tool raised it: its own, carried by its future
    gate = SENDING.get()
    withdrawn = gate is not None and gate.withdraw()
    return withdrawn or fut is not None
