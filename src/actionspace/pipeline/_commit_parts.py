"""The ledger driver's per-call helpers: where a call's ledger events go, and a replay's admission.

Kept apart from :mod:`actionspace.pipeline.commit` (the driver itself).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Mapping
from functools import partial
from typing import Any

from actionspace.errors import Abandoned, ActionError, said_safely
from actionspace.execution.guarded import Admission
from actionspace.ledger.commit import AwaitAttempt
from actionspace.outcomes import Outcome
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

__all__ = ["CallRecord", "Exempt", "late", "lost"]

_log = logging.getLogger("actionspace")


class CallRecord:
    """The ledger's ``record`` for one call: into the call's recorder while the call runs; once
    its final observation is out (the caller stores that recorder), each event is stored at
    once, in a recorder of its own with the call's id (a late answer settling the entry after
    the caller stopped waiting, perhaps while the runtime closes). A trace store that fails or
    is closed by then loses the event, never raises at the thread that settled the entry."""

    __slots__ = ("ended", "flush", "rec")

    def __init__(self, rec: Recorder, flush: Callable[[Recorder], None]) -> None:
        self.rec, self.flush, self.ended = rec, flush, False

    def __call__(self, kind: str, data: Mapping[str, Any]) -> None:
        if not self.ended:
            self.rec.add(kind, data)
            return
        own = Recorder(self.rec.run, self.rec.call_id)
        own.add(kind, data)
        try:
            self.flush(own)
        except Exception:
            _log.exception("actionspace: a ledger event of %s after the call was not stored", own.call_id)


class Exempt:
    """A call the budget let through as a replay (``Ready.exempt``): admitted should the ledger send
    it after all, its admission then settled as the engine settles any admitted call's."""

    __slots__ = ("_admit", "_held")

    def __init__(self, admit: Callable[[], Admission | ActionError | None]) -> None:
        self._admit = admit
        self._held: list[Admission] = []

    def admit(self) -> ActionError | None:
        """The protocol's ``admit_send``: the refusal, or None with the admission kept."""
        admitted = self._admit()
        if isinstance(admitted, ActionError):
            return admitted
        if admitted is not None:
            self._held.append(admitted)
        return None

    async def settled(
        self, observations: AsyncGenerator[Observation, None], rec: Recorder
    ) -> AsyncGenerator[Observation, None]:
        """``observations``, the final one settling the admission, if any, at what the send used;
        a call cut off while it ran is charged as the engine charges one."""
        held = self._held
        try:
            async for obs in observations:
                if held and not obs.provisional:
                    obs = held.pop().run(rec.add, partial(_same, obs))
                yield obs
        finally:
            if held:  # the caller stopped waiting while the send ran
                with contextlib.suppress(Abandoned):
                    held.pop().run(rec.add, _cut)


def _same(obs: Observation) -> Observation:
    return obs


def _cut() -> Observation:
    raise Abandoned("the caller stopped waiting while the tool ran")


def lost(exc: Exception) -> ActionError:
    """The error of a send whose answer was lost to a failure of ours: it may have committed."""
    why = f"{type(exc).__name__}: {said_safely(exc, 300)}"
    return ActionError.of(
        "unknown_commit",
        f"the answer of the send was lost ({why}); it may have committed",
        vendor_code="internal",
    )


async def late(command: AwaitAttempt, blocking: bool) -> Outcome | None:
    """The Outcome of an attempt still running past its timeout, if it ends within the wait."""
    try:
        if blocking:
            return command.running.result(timeout=command.seconds)
        return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(command.running)), command.seconds)
    except TimeoutError:
        return None
