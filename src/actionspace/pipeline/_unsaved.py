"""The calls of a message whose run state could not be saved: what the model is told, and the
events that still reach the trace.

A call's observation is not shown before the run's state that labels it is saved (a process
continuing the run must know what the model saw). When that save fails (the store down, the
connection lost, the disk full), a call whose observation carries output of its tool is answered
``transient``: its result is withheld, and asked again it is answered as any repeated call is (a
committed write from its ledger entry, never sent twice in one turn). An observation that carries
no tool output (an error raised before execution, an ``unknown_commit``) withholds nothing: it is
told as it is (:func:`tells_nothing`), so the model is never told to retry a write whose effect
may have happened, which the ledger answers ``unknown_commit``. The calls ran all the same, and
their events are kept: a withheld call's ``observation`` event is made the one the model is told,
with what the call ended in under ``withheld``; one told as it is keeps its own. The records go to
the trace store without the run's state (a later flush saves it), on the thread that tried the
save (:func:`stored`): a caller cancelled while the save waited does not take them along.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.pipeline.observe import fail, observation_event
from actionspace.pipeline.runs import note_errors
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine

__all__ = ["stored", "tells_nothing", "trace_only", "unsaved"]

_log = logging.getLogger("actionspace")

TOLD_AS_IT_IS: Final = frozenset(
    {
        "parse_error",
        "unknown_tool",
        "version_mismatch",
        "invalid_arguments",
        "ambiguous_reference",
        "permission_denied",
        "policy_violation",
        "budget_exceeded",
        "needs_approval",
        "unknown_commit",
    }
)
"""The categories (DESIGN §4) of an error that holds no output of its tool: raised before the
tool is asked (parse to authorize), or ``unknown_commit``, the outcome nobody learnt."""


def unsaved(
    engine: Engine, run: RunState, out: Sequence[Observation], exc: Exception, rec: Recorder | None
) -> list[Observation]:
    """What the model is told of ``out``, the run's state not saved (``exc``): an observation that
    :func:`tells_nothing` as it is, any other a ``transient`` one (its result withheld). ``rec``:
    the calls' records the failed save held back, stored now (see the module docstring); None
    when the caller keeps none."""
    _log.error("actionspace: saving the state of run %s failed", run.run_id, exc_info=exc)
    error = ActionError.of(
        "transient",
        f"the state of run {run.run_id} could not be saved ({type(exc).__name__}); "
        "this call's result is withheld: ask again",
    )
    told = [
        o if tells_nothing(o) else fail(Recorder(run, o.call_id), error, o.call_id, o.tool, o.tool_version)
        for o in out
    ]
    if rec is not None:
        withheld(rec, told)
        seen = run.errors_seen
        if seen is not None and note_errors(rec.records, seen):
            run.errors_mark += 1  # saved with the run's next state
        trace_only(engine, rec)
    return told


def tells_nothing(obs: Observation) -> bool:
    """Whether ``obs`` may be told before the run's state that labels it is saved: an error that
    carries no output of its tool (no data, items, artifact or effects; a category of
    :data:`TOLD_AS_IT_IS`), so the model learns nothing a continuing process must know it saw."""
    error = obs.error
    return (
        error is not None
        and error.category in TOLD_AS_IT_IS
        and obs.status == "error"
        and obs.data is None
        and not obs.items
        and obs.artifact_ref is None
        and not obs.effects
    )


def withheld(rec: Recorder, told: Sequence[Observation]) -> None:
    """Each call's last ``observation`` event in ``rec`` made the one of ``told`` (what the model
    is told), the event it was kept under ``withheld``; one told as it is (:func:`tells_nothing`)
    keeps its event. A call without one gets one. An id answered twice in ``told`` has one event."""
    rec.expand()
    records = rec.records
    last: dict[str, int] = {}
    for i, record in enumerate(records):
        if record[1] == "observation" and record[3] is not None:
            last[record[3]] = i
    done: set[str] = set()
    for obs in told:
        if obs.call_id in done:
            continue
        done.add(obs.call_id)
        i = last.get(obs.call_id, -1)
        if i < 0:
            event = observation_event(obs)
            records.append((next(rec.run.seq), "observation", time.time(), obs.call_id, event))
        elif not tells_nothing(obs):
            event = observation_event(obs)
            seq, kind, ts, call_id, data = records[i]
            records[i] = (seq, kind, ts, call_id, {**event, "withheld": dict(data)})


def trace_only(engine: Engine, rec: Recorder) -> None:
    """Hand ``rec``'s records to the trace store without saving the run's state first. A failing
    trace store is logged, as ``RunRegistry.flush`` logs it; events another process numbered
    alike are renumbered after its own."""
    try:
        try:
            rec.flush(engine.sink)
        except ValueError:
            engine.runs._renumbered(rec, engine.sink)
    except Exception:
        _log.exception(
            "actionspace: the trace store rejected %d events of run %s", len(rec.records), rec.run_id
        )
        rec.records = []


def stored(engine: Engine, run: RunState, out: list[Observation], rec: Recorder) -> list[Observation]:
    """``out`` once ``rec``'s events and the run's state are stored (``Engine.flush``); if the
    state could not be saved, what :func:`unsaved` tells instead, the records stored without it.
    One step for a worker thread: a caller cancelled while the save waits (its task timed out)
    leaves the step going on, so the records still reach the trace store once the save ends."""
    try:
        engine.flush(rec)
    except Exception as exc:
        return unsaved(engine, run, out, exc, rec)
    return out
