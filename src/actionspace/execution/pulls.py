"""The chunks of a blocking sync generator tool, each pulled on one of the executor's worker threads.

:meth:`Executor.apull <actionspace.execution.executor.Executor.apull>` runs each step of the
generator (``next``) on the executor's pool under the tool's timeout. A step that outlives it goes
on running (Python cannot stop a thread): it is counted among the executor's abandoned attempts,
like a blocking tool's send, until it ends. When it ends, a side-effecting tool's stream is run to
its end on that thread, its chunks handed to ``drain``, so the outcome it ends with (``finish()``,
or what it raised) can be recorded; any other stream is closed there, nothing more pulled.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Final

from actionspace.errors import ActionError
from actionspace.outcomes import Outcome

__all__ = ["END", "Pull", "Stopped"]

END: Final = object()
"""What :meth:`Pull.step` answers after the generator's last chunk."""


@dataclass(frozen=True, slots=True)
class Stopped:
    """No chunk came: the stream stops here, never pulled again.

    ``error``: the first chunk was not asked for (too many earlier attempts still run past their
    timeouts; nothing was sent); None when no chunk came within the tool's timeout. ``running``:
    the Future of the Outcome the stream ends with, while its step still runs on a worker thread.
    """

    error: ActionError | None = None
    running: Future[Outcome] | None = None


class Pull:
    """One run of a sync generator tool, stepped on worker threads.

    ``drain``: where each chunk goes once nobody waits for them (a side-effecting tool's, so its
    stream runs to its end); None closes the generator instead. ``finish``: the value of a stream
    drained to its end.
    """

    def __init__(
        self,
        produced: Generator[Any, Any, Any],
        *,
        drain: Callable[[Any], None] | None,
        finish: Callable[[], Any],
    ) -> None:
        self._produced = produced
        self._drain = drain
        self._finish = finish
        self._lock = threading.Lock()
        self._answered = False
        self.started = False
        """Whether a step was asked for."""
        self.abandoned = False
        """Whether a waiter gave up on a step: the rest of the stream belongs to its thread."""

    def arm(self) -> None:
        """Before each step is submitted: its waiter waits for it."""
        self._answered = False
        self.started = True

    def step(self) -> Any:
        """On a worker thread: the next chunk (:data:`END` after the last); raises what the
        generator raises. When the waiter gave up meanwhile, the rest of the stream instead."""
        try:
            chunk = next(self._produced, END)
        except BaseException:
            self._answer()
            raise
        return chunk if self._answer() else self._rest(chunk)

    def give_up(self) -> bool:
        """The waiter stops waiting for the current step: True when it is left running; False when
        it answered meanwhile (its Future ends at once with the chunk or the exception)."""
        with self._lock:
            if self._answered:
                return False
            self.abandoned = True
            return True

    def close(self) -> None:
        """Close the generator, unless a worker thread runs its rest (it ends it there)."""
        if not self.abandoned:
            with contextlib.suppress(ValueError):  # a step answered but not yet returned
                self._produced.close()

    def _answer(self) -> bool:
        with self._lock:
            if self.abandoned:
                return False
            self._answered = True
            return True

    def _rest(self, chunk: Any) -> Any:
        if self._drain is None:
            self._produced.close()
            return None
        while chunk is not END:
            self._drain(chunk)
            chunk = next(self._produced, END)
        return self._finish()
