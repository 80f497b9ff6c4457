"""BFCL multi-turn tasks played by a policy against executable backends, judged layer by layer.

One in-memory :class:`~actionspace.Runtime` per task holds every public method of the task's BFCL
backends (instantiated from the task's ``initial_state`` the way BFCL's checker loads them), with
the read/write sets of :mod:`._bfcl_mt_backends`. Each turn the run is offered the tools of
:meth:`~actionspace.evaluation.suite.Task.offered` (held-back tools appear at their turn), the
policy sees the chat so far, and its raw output is:

1. parsed (``parse``), then judged against the turn's possible answers (``select``, ``args``);
2. executed through ``Runtime.call_all`` whatever the judge said, so later turns see the state the
   policy really produced (``exec`` is only judged when ``args`` passed);
3. followed by BFCL's own execution of the turn's ground truth on its own instances, and BFCL's
   ``state_checker`` comparing the two states.

One :class:`~actionspace.evaluation.outcomes.StepOutcome` per turn; ``task_ok`` is true when every
turn's state check passed. The chat grows with the user messages of each turn, the assistant
message and one ``tool`` message per executed call whose content is the observation as JSON.

The play stops at a turn whose deciding call the runtime closed before sending it (``not_sent``,
:func:`~actionspace.evaluation.outcomes.never_sent`), as the other runners stop: nothing more can
be sent to a closed runtime. BFCL's own runner likewise stops an entry whose inference was cut
short and compares none of its turns (``multi_turn:force_terminated``); there the model is at
fault and the entry fails, here the runtime is, so the task is undecided, not failed: that turn's
state is not checked (part of its calls never ran), no later turn is asked for,
``details["not_sent_turn"]`` names it and ``task_ok`` is None (the run never got that far), its
``exec`` left undecided as the metrics read ``not_sent``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionspaceError
from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_mt_backends import instantiate, load_docs, public_methods, tool_specs
from actionspace.evaluation._policy_view import chat_reply
from actionspace.evaluation.bfcl_multiturn import MultiTurnEntry, _Reference
from actionspace.evaluation.judge import judge_turn
from actionspace.evaluation.outcomes import (
    StepOutcome,
    TaskOutcome,
    deciding_error,
    never_sent,
    tool_versions,
)
from actionspace.evaluation.policies import Policy, PolicyView, Proposal, openai_tools
from actionspace.evaluation.suite import ExpectedCall, Task
from actionspace.parse import parse
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime

__all__ = ["MULTI_TURN_ORIGIN", "evaluate_multiturn", "is_multiturn"]

MULTI_TURN_ORIGIN = "bfcl:multi_turn"
"""Origin prefix of the tasks this module plays."""


def is_multiturn(task: Task) -> bool:
    """A BFCL multi-turn task with executable backends."""
    return task.origin.startswith(MULTI_TURN_ORIGIN) and bool(task.initial_state)


def evaluate_multiturn(
    suite_name: str, task: Task, policy: Policy, *, variant: str = "baseline"
) -> TaskOutcome:
    """Play every turn of ``task`` with ``policy`` and judge it; see the module docstring.

    Only the ``baseline`` variant exists for multi-turn tasks (default). Raises ActionspaceError for
    another variant or a task that is not a BFCL multi-turn task; BfclDataError when the pinned
    BFCL data cannot be fetched.
    """
    if variant != "baseline":
        raise ActionspaceError(f"{task.id}: multi-turn tasks have no variant {variant!r}")
    if not is_multiturn(task):
        raise ActionspaceError(f"{task.id}: not a BFCL multi-turn task (origin {task.origin!r})")
    entry = _entry(task)
    instances = {
        c: instantiate(c, entry.initial_config, long_context=entry.long_context)
        for c in entry.involved_classes
    }
    reference = _Reference()
    rt = Runtime(
        "memory://", recover_on_start=False, principal=Principal(id="eval", scopes=tuple(task.scopes))
    )
    steps: list[StepOutcome] = []
    chosen: list[tuple[str, str]] = []
    checks: list[bool] = []
    details: dict[str, Any] = {}
    tools: dict[str, dict[str, Any]] = {}
    run_id = f"eval:{task.id}:{variant}"
    try:
        for spec in _specs(entry.involved_classes, instances):
            rt.register(spec)
        rt.new_run(run_id)
        chat: list[Mapping[str, Any]] = []
        for turn in range(task.turns):
            chat.extend(task.messages(turn))
            offered = rt.offer([str(t.get("name")) for t in task.offered(turn)], run_id=run_id)
            tools = _union(tools, tool_versions(rt, (str(d["name"]) for d in offered)))
            view = PolicyView(task_id=task.id, turn=turn, messages=tuple(chat), tools=openai_tools(offered))
            proposal = policy.propose(view)
            step, pairs, reply = _play_turn(rt, run_id, turn, view, proposal, task.possible_answers(turn))
            steps.append(step)
            chosen.extend(pairs)
            chat.extend(reply)
            if not step.sent:
                details["not_sent_turn"] = turn  # the runtime closed: nothing more can be sent
                break
            verdict = reference.compare(instances, reference.run_turn(entry, entry.ground_truth[turn]))
            checks.append(bool(verdict.get("valid")))
            if not checks[-1] and "failed_turn" not in details:
                details["failed_turn"] = turn
                differences = verdict.get("details", {}).get("differences", {})
                details["differences"] = {k: repr(v)[:500] for k, v in dict(differences).items()}
    finally:
        rt.close()
        reference.release(entry)
    details["state_checks"] = checks
    details["tools"] = tools
    return TaskOutcome(
        suite=suite_name,
        task_id=task.id,
        category=task.category,
        variant=variant,
        steps=tuple(steps),
        task_ok=None if "not_sent_turn" in details else all(checks),
        run_id=run_id,
        chosen=tuple(chosen),
        details=details,
    )


def _union(
    seen: Mapping[str, Mapping[str, Any]], offered: Mapping[str, Mapping[str, str]]
) -> dict[str, dict[str, Any]]:
    """The tools of earlier turns joined with this turn's.

    A tool offered at another version than before keeps the newest as ``key``/``schema_hash`` and
    lists every version it was offered at, in order, in ``versions``.
    """
    out = {name: dict(entry) for name, entry in seen.items()}
    for name, now in offered.items():
        before = out.get(name)
        if before is None:
            out[name] = dict(now)
            continue
        versions = list(before.get("versions") or [_version(before)])
        if _version(now) not in versions:
            out[name] = {**now, "versions": [*versions, dict(now)]}
    return out


def _version(entry: Mapping[str, Any]) -> dict[str, str]:
    return {"key": str(entry["key"]), "schema_hash": str(entry["schema_hash"])}


class _Slot:
    """The backend instances of the task being played (the specs' functions call into them)."""

    instances: Mapping[str, Any] = {}


_SLOT = _Slot()
_SPECS: dict[tuple[str, ...], list[ToolSpec]] = {}
"""Tool specs by involved classes, built once: their functions call the current task's instance."""


class _Method:
    """A backend method looked up on the current task's instance at call time."""

    __slots__ = ("class_name", "name")

    def __init__(self, class_name: str, name: str) -> None:
        self.class_name, self.name = class_name, name

    def __call__(self, **arguments: Any) -> Any:
        return getattr(_SLOT.instances[self.class_name], self.name)(**arguments)


def _specs(classes: Sequence[str], instances: Mapping[str, Any]) -> list[ToolSpec]:
    """The task's tools, bound (through :data:`_SLOT`) to ``instances``.

    Registering the same immutable specs in every task's fresh runtime skips rebuilding and
    recompiling ~30 schemas per task. One task is played at a time per process.
    """
    _SLOT.instances = instances
    key = tuple(classes)
    specs = _SPECS.get(key)
    if specs is None:
        specs = []
        for options in tool_specs(instances, load_docs(_bfcl_data.fetch(), classes)):
            owner = next(c for c in reversed(key) if options["name"] in public_methods(instances[c]))
            options["fn"] = _Method(owner, options["name"])
            options["blocking"] = False  # in-memory backends: run on the caller's thread, no pool hop
            specs.append(ToolSpec(**options))
        _SPECS[key] = specs
    return specs


def _entry(task: Task) -> MultiTurnEntry:
    """The task as BFCL's executor reads it; the ground truth is rebuilt as call strings."""
    state = task.initial_state
    return MultiTurnEntry(
        id=task.id,
        category=task.origin.removeprefix("bfcl:"),
        involved_classes=tuple(state["involved_classes"]),
        initial_config=state.get("initial_config") or {},
        ground_truth=tuple(tuple(_call_text(c) for c in turn) for turn in task.expected)
        if task.expected
        else ((),) * task.turns,
    )


def _call_text(call: ExpectedCall) -> str:
    """``name(arg=value, …)`` with each argument's first acceptable value as a Python literal."""
    arguments = ", ".join(f"{arg}={values[0]!r}" for arg, values in call.arguments.items() if values)
    return f"{call.name}({arguments})"


def _play_turn(
    rt: Runtime,
    run_id: str,
    turn: int,
    view: PolicyView,
    proposal: Proposal,
    expected: Sequence[Mapping[str, Any]],
) -> tuple[StepOutcome, tuple[tuple[str, str], ...], list[dict[str, Any]]]:
    """Judge and execute one turn; returns its step, its confusion pairs and the chat it adds."""
    base: dict[str, Any] = {
        "index": turn,
        "raw": proposal.raw,
        "expected_tools": tuple(next(iter(e)) for e in expected),
        "confidence": proposal.confidence,
        "tokens": proposal.tokens,
    }
    if proposal.empty:
        verdict = judge_turn([], expected)
        fields: dict[str, Any] = {**base, "parse_ok": True, "select_ok": verdict.select_ok}
        if verdict.select_ok:
            fields["args_ok"] = verdict.args_ok
            fields["exec_ok"] = True if verdict.args_ok else None
        return StepOutcome(**fields), verdict.pairs, []
    parsed = parse(proposal.raw, tools=list(view.tools))
    if parsed.error is not None:
        rt.record(run_id, "model_output", {"raw": _printable(proposal.raw)})
        reply = [{"role": "assistant", "content": _printable(proposal.raw)}]
        return StepOutcome(**base, parse_ok=False, error_category="parse_error"), (), reply
    calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    ids = [c.id or f"call_{turn}_{i}" for i, c in enumerate(parsed.calls)]
    verdict = judge_turn(calls, expected)
    observations = rt.call_all(proposal.raw, run_id=run_id) if calls else []
    failed = deciding_error(observations)
    fields = {**base, "calls": tuple(calls), "parse_ok": True, "select_ok": verdict.select_ok}
    if verdict.select_ok:
        fields["args_ok"] = verdict.args_ok
    if verdict.select_ok and verdict.args_ok:
        fields["exec_ok"] = failed is None
    if failed is not None:
        fields["error_category"] = failed.category
        fields["sent"] = not never_sent(failed)
    reply = chat_reply(parsed.content, calls, ids, observations)
    return StepOutcome(**fields), verdict.pairs, reply


def _printable(raw: Any) -> Any:
    return raw if isinstance(raw, str | dict | list) else repr(raw)
