"""The demo's calendar tasks played step by step by a policy against a real calendar, judged by layer.

Each task gets a fresh :class:`~actionspace.demo.calendar.CalendarService` in a temporary folder,
seeded for the task's day, and the demo's own runtime (``memory://`` trace store) acting for the
demo principal. The policy sees the chat so far and proposes; an empty proposal means it answered
the user, which ends the task. Otherwise its raw output is parsed and executed with
``Runtime.call_all``; the chat grows with the assistant message and one ``tool`` message per call
whose content is the observation dict as JSON. At most ``max_steps`` steps are played; the play
ends early when the runtime closed before sending a call.

Judging, one :class:`~actionspace.evaluation.outcomes.StepOutcome` per step:

* ``parse``: the raw output parsed (an empty first proposal is a well-formed "no call").
* ``select`` / ``args``: a step that calls ``create_event`` is judged with
  :func:`~actionspace.evaluation.judge.judge_turn` against the task's expected calls (its other
  calls must be offered tools); a step of lookups only passes both when every tool it calls is
  offered. In a negative task (``no_call``) any call fails ``select``.
* ``exec``: every observation of the step is ok (judged once ``select`` and ``args`` passed);
  ``error_category`` is the category of the error that decides the step
  (:func:`~actionspace.evaluation.outcomes.deciding_error`: its first execution failure, else its
  first wait, refusal or unknown commit) and ``recovered`` marks a step, right after a
  step with an error that asks the model to act (a failure or a refusal, not a wait for approval
  nor an unknown commit), whose calls all succeeded and passed ``select`` and ``args``.
* ``task``: the task's registered predicate on the final calendar; in a negative task
  (``no_call``, ``info_missing``, ``no_tool``, ``permission_missing``), that no write succeeded —
  a successful write is recorded as the incident ``write_in_negative_task``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Final

from actionspace.demo.calendar import CalendarService
from actionspace.demo.scenario import PRINCIPAL, build_runtime, seed_calendar
from actionspace.errors import ActionspaceError
from actionspace.evaluation._policy_view import chat_reply
from actionspace.evaluation.judge import judge_turn
from actionspace.evaluation.outcomes import (
    StepOutcome,
    TaskOutcome,
    deciding_error,
    never_sent,
    tool_versions,
)
from actionspace.evaluation.policies import Policy, PolicyView, Proposal, openai_tools
from actionspace.evaluation.suite import Task, get_predicate
from actionspace.parse import parse
from actionspace.runtime import Runtime
from actionspace.types import Observation

__all__ = ["DEMO_ORIGIN", "WRITE_IN_NEGATIVE_TASK", "evaluate_demo", "is_demo"]

DEMO_ORIGIN: Final = "demo:calendar"
"""Origin of the tasks this module plays."""
WRITE_IN_NEGATIVE_TASK: Final = "write_in_negative_task"
"""Incident: a write or external call succeeded in a task where none was right."""
JUDGED_TOOL: Final = "create_event"
"""The call whose arguments are judged against the task's expected calls."""
NEGATIVE: Final = frozenset({"no_tool", "info_missing", "permission_missing"})


def is_demo(task: Task) -> bool:
    """A task of the demo's calendar scenario (``demo:calendar`` origin, with a seeded calendar)."""
    return task.origin == DEMO_ORIGIN and "calendar" in task.initial_state


def evaluate_demo(suite_name: str, task: Task, policy: Policy, *, max_steps: int = 10) -> TaskOutcome:
    """Play ``task`` with ``policy`` on a freshly seeded calendar; see the module docstring.

    ``max_steps`` (default 10) bounds the number of model steps; a run that hits it is marked
    ``details["max_steps_reached"]``. Raises ActionspaceError for a task that is not a demo task.
    """
    if not is_demo(task):
        raise ActionspaceError(f"{task.id}: not a demo calendar task (origin {task.origin!r})")
    negative = task.no_call or task.category in NEGATIVE
    expected = [] if task.no_call else task.possible_answers(0)
    day = date.fromisoformat(str(task.initial_state["calendar"]["day"]))
    run_id = f"eval:{task.id}:baseline"
    steps: list[StepOutcome] = []
    chosen: list[tuple[str, str]] = []
    writes: list[str] = []
    details: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="actionspace-eval-") as folder:
        service = CalendarService(Path(folder) / "calendar.db")
        try:
            seed_calendar(service, day)
            rt = build_runtime(service, "memory://")
            try:
                rt.new_run(run_id, principal=PRINCIPAL)
                names = [str(t.get("name")) for t in task.offered(0)]
                offered = rt.offer(names, run_id=run_id)
                details["tools"] = tool_versions(rt, (str(d["name"]) for d in offered))
                tools = openai_tools(offered)
                chat: list[Mapping[str, Any]] = list(task.messages(0))
                for index in range(max_steps):
                    view = PolicyView(task_id=task.id, turn=index, messages=tuple(chat), tools=tools)
                    proposal = policy.propose(view)
                    if proposal.empty:
                        if not any(s.expected_tools or negative for s in steps):
                            verdict = judge_turn([], expected)
                            steps.append(_answered(index, proposal, expected, verdict.select_ok))
                            chosen.extend(verdict.pairs)
                        break
                    after_error = bool(steps) and steps[-1].erred
                    step, pairs, reply, observations = _play_step(
                        rt, run_id, index, view, proposal, expected, names, after_error
                    )
                    steps.append(step)
                    chosen.extend(pairs)
                    chat.extend(reply)
                    writes.extend(o.tool for o in observations if o.ok and _writes(rt, o.tool))
                    if not step.sent:
                        break  # the runtime closed before sending a call: nothing more can be sent
                else:
                    details["max_steps_reached"] = True
            finally:
                rt.close()
            task_ok, incidents = _task_verdict(task, service, negative, writes)
        finally:
            service.close()
    if writes:
        details["writes"] = writes
    return TaskOutcome(
        suite=suite_name,
        task_id=task.id,
        category=task.category,
        steps=tuple(steps),
        task_ok=task_ok,
        run_id=run_id,
        incidents=incidents,
        chosen=tuple(chosen),
        details=details,
    )


def _writes(rt: Runtime, tool: str) -> bool:
    """Does ``tool`` change anything outside the run (a write or an external effect)?"""
    return str(rt.describe(tool).get("effect", "write")) != "read"


def _task_verdict(
    task: Task, service: CalendarService, negative: bool, writes: Sequence[str]
) -> tuple[bool | None, tuple[str, ...]]:
    incidents = (WRITE_IN_NEGATIVE_TASK,) if negative and writes else ()
    if negative:
        ok = not writes
        if task.predicate is not None:
            ok = ok and get_predicate(task.predicate)(task, service)
        return ok, incidents
    if task.predicate is not None:
        return get_predicate(task.predicate)(task, service), incidents
    return None, incidents


def _answered(
    index: int, proposal: Proposal, expected: Sequence[Mapping[str, Any]], right: bool
) -> StepOutcome:
    """The model answered without any call before doing anything else."""
    return StepOutcome(
        index=index,
        raw=proposal.raw,
        expected_tools=tuple(next(iter(e)) for e in expected),
        parse_ok=True,
        select_ok=right,
        args_ok=True if right else None,
        exec_ok=True if right else None,
        confidence=proposal.confidence,
        tokens=proposal.tokens,
    )


def _play_step(
    rt: Runtime,
    run_id: str,
    index: int,
    view: PolicyView,
    proposal: Proposal,
    expected: Sequence[Mapping[str, Any]],
    offered: Sequence[str],
    after_error: bool,
) -> tuple[StepOutcome, tuple[tuple[str, str], ...], list[dict[str, Any]], list[Observation]]:
    """Parse, judge and execute one step; returns its step, confusion pairs, chat and observations."""
    base: dict[str, Any] = {
        "index": index,
        "raw": proposal.raw,
        "confidence": proposal.confidence,
        "tokens": proposal.tokens,
    }
    parsed = parse(proposal.raw, tools=list(view.tools))
    if parsed.error is not None:
        rt.record(run_id, "model_output", {"raw": _printable(proposal.raw)})
        reply = [{"role": "assistant", "content": _printable(proposal.raw)}]
        return StepOutcome(**base, parse_ok=False, error_category="parse_error"), (), reply, []
    calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    ids = [c.id or f"call_{index}_{i}" for i, c in enumerate(parsed.calls)]
    judged = [c for c in calls if c["name"] == JUDGED_TOOL]
    others = [c for c in calls if c["name"] != JUDGED_TOOL]
    pairs: tuple[tuple[str, str], ...] = ()
    if not expected or judged:
        verdict = judge_turn(judged if expected else calls, expected)
        select_ok = verdict.select_ok and all(c["name"] in offered for c in others)
        args_ok, pairs = verdict.args_ok, verdict.pairs
        base["expected_tools"] = tuple(next(iter(e)) for e in expected)
    else:
        select_ok = args_ok = all(c["name"] in offered for c in calls)
    observations = rt.call_all(proposal.raw, run_id=run_id) if calls else []
    failed = deciding_error(observations)
    fields: dict[str, Any] = {**base, "calls": tuple(calls), "parse_ok": True, "select_ok": select_ok}
    if select_ok:
        fields["args_ok"] = args_ok
    if select_ok and args_ok:
        fields["exec_ok"] = failed is None
    if failed is not None:
        fields["error_category"] = failed.category
        fields["sent"] = not never_sent(failed)
    fields["recovered"] = after_error and bool(calls) and failed is None and select_ok and args_ok
    return (
        StepOutcome(**fields),
        pairs,
        chat_reply(parsed.content, calls, ids, observations, whole=True),
        list(observations),
    )


def _printable(raw: Any) -> Any:
    return raw if isinstance(raw, str | dict | list) else repr(raw)
