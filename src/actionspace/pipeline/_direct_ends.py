"""The ends of the commonest simple call's frame (pipeline/_direct.py): a sync tool begun as
``Messages.quick`` begins it, the observation or coroutine once the call began, what a call that
raised past its tool's failures stored, and the memory trace store's side of a call's record."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol, cast

from actionspace.discovery.runs import RunState
from actionspace.pipeline._entry import FastCall
from actionspace.pipeline._run import AppendCall, Step, begin
from actionspace.trace.events import CallShape
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.pipeline.messages import Messages

__all__ = ["KeepsCalls", "begun", "keeps", "raised", "stepped"]


class KeepsCalls(Protocol):
    """The memory trace store's side of a call recorded here (trace/memory.py)."""

    def shape_index(self, shape: CallShape) -> int: ...

    def append_kept(self, run_id: str, kept: tuple[Any, ...]) -> None: ...

    def call_log(self, run_id: str) -> tuple[list[tuple[Any, ...]], threading.Lock, dict[str, int]]: ...


def keeps(store: object) -> KeepsCalls | None:
    """``store`` when it takes a call's record as it keeps it (the memory trace store), else None."""
    if all(hasattr(store, a) for a in ("append_call", "append_kept", "shape_index", "call_log")):
        return cast(KeepsCalls, store)
    return None


def begun(
    messages: Messages, quick: FastCall, run: RunState, node_id: str | None, append: AppendCall | None
) -> Observation | Coroutine[Any, Any, Observation]:
    """``Messages.quick`` of a call :meth:`FastPath.take` accepted: begun (``_run.begin``), then
    ended as :func:`stepped` ends it; a bug of ours is an ``internal`` observation, and a
    cancellation stores what was recorded before it goes on."""
    engine = messages.engine
    rec = Recorder(run, None)
    try:
        step = begin(
            messages.in_flight, quick, rec, node_id, False, engine.executor, engine.artifacts, append
        )
    except Exception as exc:  # a bug of ours or of the tool's wrapper: typed, never raised
        step = engine.internal(exc, rec, quick.tool_call())
        run.flow.observed(step)
    except BaseException:  # what was recorded is still stored
        stored = raised(messages, rec, quick, run)
        if stored is None:
            raise
        return stored
    return stepped(messages, step, quick, rec, run)


def stepped(
    messages: Messages, step: Step, quick: FastCall, rec: Recorder, run: RunState
) -> Observation | Coroutine[Any, Any, Observation]:
    """``Messages.quick``'s end once the call began: the observation, or the coroutine that ends
    it (its tool waits) or stores its records."""
    if not isinstance(step, Observation):  # its tool waits
        return messages._ended(step, quick, rec, run)
    if rec.call is None and not rec.records:
        return step  # begin handed its record to the store (``direct``)
    return messages._settled(step, quick, rec, run)


def raised(
    messages: Messages, rec: Recorder, quick: FastCall, run: RunState
) -> Coroutine[Any, Any, Observation] | None:
    """A precompiled call that raised past its tool's own failures (cancelled): the coroutine
    that stores what it recorded when ``close()`` cut it, else None once that is stored (the
    caller raises again)."""
    cut = messages._cut(rec, quick, raised=True)
    if cut is None:
        with contextlib.suppress(Exception):
            messages.engine.flush(rec)
        return None
    return messages._stored(rec, run, cut)
