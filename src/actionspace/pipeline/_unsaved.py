"""The calls of a message whose run state could not be saved: what the model is told, and the
events that still reach the trace.

A call's observation is not shown before the run's state that labels it is saved (a process
continuing the run must know what the model saw). When that save fails (the store down, the
connection lost, the disk full), each call of the message is answered ``transient``: its result
is withheld, and asked again it is answered as any repeated call is (a committed write from its
ledger entry, never sent twice in one turn). The calls ran all the same, and their events are
kept: each call's ``observation`` event is made the one the model is told, with what the call
ended in under ``withheld``, and the records go to the trace store without the run's state (a
later flush saves it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError
from actionspace.pipeline.observe import fail, observation_event
from actionspace.pipeline.runs import note_errors
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation

if TYPE_CHECKING:
    from actionspace.pipeline.engine import Engine

__all__ = ["trace_only", "unsaved"]

_log = logging.getLogger("actionspace")


def unsaved(
    engine: Engine, run: RunState, out: Sequence[Observation], exc: Exception, rec: Recorder | None
) -> list[Observation]:
    """A ``transient`` observation per call of ``out``: the run's state could not be saved
    (``exc``). ``rec``: the calls' records the failed save held back, stored now (see the module
    docstring); None when the caller keeps none."""
    _log.error("actionspace: saving the state of run %s failed", run.run_id, exc_info=exc)
    error = ActionError.of(
        "transient",
        f"the state of run {run.run_id} could not be saved ({type(exc).__name__}); "
        "this call's result is withheld: ask again",
    )
    told = [fail(Recorder(run, o.call_id), error, o.call_id, o.tool, o.tool_version) for o in out]
    if rec is not None:
        withheld(rec, told)
        seen = run.errors_seen
        if seen is not None and note_errors(rec.records, seen):
            run.errors_mark += 1  # saved with the run's next state
        trace_only(engine, rec)
    return told


def withheld(rec: Recorder, told: Sequence[Observation]) -> None:
    """Each call's last ``observation`` event in ``rec`` made the one of ``told`` (what the model
    is told), the event it was kept under ``withheld``; a call without one gets one. An id
    answered twice in ``told`` has one event."""
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
        event = observation_event(obs)
        i = last.get(obs.call_id, -1)
        if i < 0:
            records.append((next(rec.run.seq), "observation", time.time(), obs.call_id, event))
        else:
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
