"""Run a policy over a suite through the real runtime and record every layer of every task.

For each task (and each ablation variant) a fresh in-memory :class:`~actionspace.Runtime` offers the
task's tools (as the variant shows them), the policy proposes raw output, and the runtime parses,
validates and executes it exactly as it would in production; the judge compares the parsed calls
with the ground truth. The result is one :class:`~actionspace.evaluation.outcomes.TaskOutcome` per
task and variant, with the layers ``parse → select → args → exec → task``, each only judged when
the previous one passed.

Single-turn tasks are run here; the tools of a single-turn suite have no backend, so they answer
with their validated arguments (``exec`` then means "accepted and ran through the pipeline").
BFCL multi-turn tasks are played against their executable backends by
:func:`~actionspace.evaluation._runner_multiturn.evaluate_multiturn`, and the demo's calendar tasks
step by step against a real calendar by :func:`~actionspace.evaluation._runner_demo.evaluate_demo`
(both baseline variant only).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionspaceError
from actionspace.evaluation._parallel_eval import run_split
from actionspace.evaluation._runner_demo import evaluate_demo, is_demo
from actionspace.evaluation._runner_env import Environment, EnvironmentInput, RuntimeFactory, evaluate_env
from actionspace.evaluation._runner_multiturn import evaluate_multiturn, is_multiturn
from actionspace.evaluation.ablations import ABLATIONS, counterfactual
from actionspace.evaluation.judge import answer_found, ground_truth_arguments, judge_turn
from actionspace.evaluation.outcomes import (
    StepOutcome,
    TaskOutcome,
    deciding_error,
    never_sent,
    tool_versions,
)
from actionspace.evaluation.policies import Policy, PolicyView, Proposal, ScriptedPolicy, openai_tools
from actionspace.evaluation.suite import Suite, Task
from actionspace.parse import parse
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.session import GatePolicy

__all__ = [
    "Environment",
    "EnvironmentInput",
    "RuntimeFactory",
    "evaluate",
    "ground_truth_policy",
    "runnable",
]

Progress = Callable[[TaskOutcome | None], None]
"""Called after every task and variant (None when the variant does not apply to the task)."""

COUNTERFACTUAL = "counterfactual"
"""The variant that changes one key fact of the request; the argument built from it must change."""


def runnable(task: Task) -> bool:
    """Tasks this runner judges: one turn without executable backend state, BFCL multi-turn, demo."""
    return (task.turns == 1 and not task.initial_state) or is_multiturn(task) or is_demo(task)


def evaluate(
    suite: Suite,
    policy: Policy,
    *,
    variants: Sequence[str] = ("baseline",),
    seed: int = 0,
    limit: int | None = None,
    progress: Progress | None = None,
    workers: int = 1,
    runtime_factory: RuntimeFactory | None = None,
    trace_dir: Path | str | None = None,
    gate: GatePolicy | None = None,
) -> list[TaskOutcome]:
    """Every runnable task of ``suite`` under ``policy``, once per variant.

    With ``runtime_factory`` (the reset hook, see :mod:`._runner_env`), every task of the suite is
    instead played turn by turn through a session on the fresh environment the factory builds for
    it (baseline only, in this process): real tools, p_exec from real execution, p_task from the
    task's predicate on the environment's state, incidents from real effects. The traces go to one
    SQLite file per evaluation, ``<trace_dir>/trace.db`` (default: a new temporary folder, kept);
    ``gate`` (e.g. a :class:`~actionspace.evaluation.calibration.ThresholdPolicy`) gates every
    call on the proposal's confidence (default None: ungated).

    A variant is ``baseline``, an interface ablation (:data:`~actionspace.evaluation.ablations.ABLATIONS`)
    or ``counterfactual`` (tasks whose request has no fact copied into an argument are left out).
    ``workers`` > 1 plays the tasks in that many forked processes when the policy is
    ``independent`` and there are enough tasks (default 1: this process only); the outcomes are
    the same, in the same order. A policy with a ``note(task_id) -> Mapping`` method has what it
    returns after each task merged into that outcome's ``details`` (e.g. which faults it injected).
    """
    unknown = [v for v in variants if v not in ("baseline", COUNTERFACTUAL) and v not in ABLATIONS]
    if unknown:
        choices = sorted([*ABLATIONS, COUNTERFACTUAL])
        raise ActionspaceError(f"unknown variant(s) {unknown}; choose from {choices}")
    if runtime_factory is not None:
        if tuple(variants) != ("baseline",):
            raise ActionspaceError("tasks played on a runtime factory have the baseline variant only")
        return _evaluate_env(suite, policy, runtime_factory, trace_dir, gate, limit, progress)
    tasks = [t for t in suite.tasks if runnable(t)][:limit]
    jobs = [(variant, task) for variant in variants for task in tasks]

    note = getattr(policy, "note", None)

    def run(job: tuple[str, Task]) -> TaskOutcome | None:
        variant, task = job
        if is_multiturn(task):
            outcome = evaluate_multiturn(suite.name, task, policy) if variant == "baseline" else None
        elif is_demo(task):
            outcome = evaluate_demo(suite.name, task, policy) if variant == "baseline" else None
        else:
            outcome = _run_task(suite.name, task, policy, variant, seed)
        if outcome is not None and callable(note):
            # what the policy says about its answers travels with the outcome, from any worker
            extra = note(task.id)
            if extra:
                outcome = dataclasses.replace(outcome, details={**outcome.details, **extra})
        return outcome

    results = None
    if workers > 1 and getattr(policy, "independent", False):
        results = run_split(jobs, run, workers=workers, done=progress)
    if results is None:
        results = []
        for job in jobs:
            results.append(run(job))
            if progress is not None:
                progress(results[-1])
    return [o for o in results if o is not None]


def _evaluate_env(
    suite: Suite,
    policy: Policy,
    factory: RuntimeFactory,
    trace_dir: Path | str | None,
    gate: GatePolicy | None,
    limit: int | None,
    progress: Progress | None,
) -> list[TaskOutcome]:
    folder = Path(trace_dir) if trace_dir is not None else Path(tempfile.mkdtemp(prefix="actionspace-eval-"))
    folder.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{(folder / 'trace.db').resolve()}"
    outcomes: list[TaskOutcome] = []
    note = getattr(policy, "note", None)
    for task in suite.tasks[:limit]:
        outcome = evaluate_env(suite.name, task, policy, factory, store=store, gate=gate)
        extra = note(task.id) if callable(note) else None
        if extra:
            outcome = dataclasses.replace(outcome, details={**outcome.details, **extra})
        outcomes.append(outcome)
        if progress is not None:
            progress(outcomes[-1])
    return outcomes


def _echo(**arguments: Any) -> dict[str, Any]:
    return arguments


_SPECS: dict[str, ToolSpec] = {}
"""Echo tools already built, by their definition's JSON: tasks sharing a function doc share its spec
(immutable), so a fresh runtime per task does not rebuild and recompile it."""


def _echo_spec(tool: Mapping[str, Any]) -> ToolSpec:
    try:
        key = json.dumps(tool, sort_keys=True)
    except (TypeError, ValueError):
        key = None
    spec = _SPECS.get(key) if key is not None else None
    if spec is None:
        spec = ToolSpec(
            name=str(tool.get("name", "")),
            input_schema=dict(tool.get("parameters") or tool.get("input_schema") or {"type": "object"}),
            fn=_echo,
            effect="none",  # answers with its validated arguments: pure, so it runs inline
            description=str(tool.get("description", "")),
            scopes=("read:*",),
        )
        if key is not None:
            if len(_SPECS) >= 8192:
                _SPECS.clear()
            _SPECS[key] = spec
    return spec


def _runtime(task: Task, shown: Iterable[Mapping[str, Any]]) -> tuple[Runtime, list[str]]:
    rt = Runtime(
        "memory://", recover_on_start=False, principal=Principal(id="eval", scopes=tuple(task.scopes))
    )
    rejected: list[str] = []
    for tool in shown:
        try:
            rt.register(_echo_spec(tool))
        except ActionspaceError as exc:
            rejected.append(f"{tool.get('name', '')}: {exc}")
    return rt, rejected


def _counterfactual(
    task: Task, seed: int
) -> tuple[tuple[Mapping[str, Any], ...], list[dict[str, Any]]] | None:
    """The task's request with one key fact changed and the ground truth that must follow it."""
    expected: list[dict[str, Any]] = list(task.possible_answers(0))
    if not isinstance(task.request, str) or not expected:
        return None
    cf = counterfactual(task.request, expected, seed)
    if cf is None:
        return None

    def follow(values: list[Any]) -> list[Any]:
        real = [v for v in values if v != ""]
        return [cf.changed] if len(real) == 1 and real[0] == cf.original else values

    # every argument that copied the fact must follow it (a city named once may feed two calls)
    changed = [
        {name: {arg: follow(list(values)) for arg, values in spec.items()} for name, spec in call.items()}
        for call in expected
    ]
    return ({"role": "user", "content": cf.request},), changed


def _run_task(suite: str, task: Task, policy: Policy, variant: str, seed: int) -> TaskOutcome | None:
    ablation = ABLATIONS.get(variant)
    tools = [dict(t) for t in task.offered(0)]
    shown = ablation.tools(tools, seed) if ablation is not None else tools
    expected: list[dict[str, Any]] = list(task.possible_answers(0))
    messages = tuple(task.messages(0))
    if ablation is not None:
        expected = ablation.expected([expected], tools, seed)[0]
    if variant == COUNTERFACTUAL:
        changed = _counterfactual(task, seed)
        if changed is None:
            return None  # no fact of this request is copied into an argument
        messages, expected = changed
    rt, rejected = _runtime(task, shown)
    try:
        run_id = rt.new_run(f"eval:{task.id}:{variant}")
        offered = rt.offer(run_id=run_id)
        details: dict[str, Any] = {"tools": tool_versions(rt, (str(d["name"]) for d in offered))}
        view = PolicyView(task_id=task.id, turn=0, messages=messages, tools=openai_tools(offered))
        proposal = policy.propose(view)
        if task.answers:
            step, chosen, task_ok = _judge_answer(rt, run_id, view, proposal, task.answers)
        else:
            step, chosen = _judge(rt, run_id, view, proposal, expected)
            task_ok = step.exec_ok
    finally:
        rt.close()
    return TaskOutcome(
        suite=suite,
        task_id=task.id,
        category=task.category,
        variant=variant,
        steps=(step,),
        task_ok=task_ok,
        run_id=run_id,
        chosen=chosen,
        details={**details, "schema_rejected": rejected} if rejected else details,
    )


def _judge(
    rt: Runtime, run_id: str, view: PolicyView, proposal: Proposal, expected: list[dict[str, Any]]
) -> tuple[StepOutcome, tuple[tuple[str, str], ...]]:
    base: dict[str, Any] = {
        "index": 0,
        "raw": proposal.raw,
        "expected_tools": tuple(next(iter(e)) for e in expected),
        "confidence": proposal.confidence,
        "tokens": proposal.tokens,
    }
    if proposal.empty:
        calls: list[dict[str, Any]] = []
    else:
        parsed = parse(proposal.raw, tools=list(view.tools))
        if parsed.error is not None:
            rt.record(run_id, "model_output", {"raw": _printable(proposal.raw)})
            return StepOutcome(**base, parse_ok=False, error_category="parse_error"), ()
        calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    verdict = judge_turn(calls, expected)
    step: dict[str, Any] = {**base, "calls": tuple(calls), "parse_ok": True, "select_ok": verdict.select_ok}
    if not verdict.select_ok:
        return StepOutcome(**step), verdict.pairs
    step["args_ok"] = verdict.args_ok
    if not verdict.args_ok:
        # Not judged for exec, but the runtime's own diagnosis names the fault (category, field).
        diagnosis = next(
            (o.error for o in rt.call_all(proposal.raw, run_id=run_id) if o.error is not None), None
        )
        if diagnosis is not None:
            step["error_category"] = diagnosis.category
        return StepOutcome(**step), verdict.pairs
    if not calls:
        return StepOutcome(**step, exec_ok=True), verdict.pairs
    failed = deciding_error(rt.call_all(proposal.raw, run_id=run_id))
    step["exec_ok"] = failed is None
    step["error_category"] = failed.category if failed is not None else None
    step["sent"] = failed is None or not never_sent(failed)
    return StepOutcome(**step), verdict.pairs


def _judge_answer(
    rt: Runtime, run_id: str, view: PolicyView, proposal: Proposal, answers: Sequence[str]
) -> tuple[StepOutcome, tuple[tuple[str, str], ...], bool | None]:
    """A task judged by its final answer: any offered tool may be called (or none); the calls go
    through the pipeline (select = offered names, args = accepted by validation, exec = ran), and the
    task passes when every call ran and the reply's text holds an acceptable answer."""
    base: dict[str, Any] = {"index": 0, "raw": proposal.raw, "confidence": proposal.confidence}
    base["tokens"] = proposal.tokens
    if proposal.empty:
        return StepOutcome(**base, select_ok=True, args_ok=True, exec_ok=True), (), False
    parsed = parse(proposal.raw, tools=list(view.tools))
    if parsed.error is not None:
        rt.record(run_id, "model_output", {"raw": _printable(proposal.raw)})
        return StepOutcome(**base, parse_ok=False, error_category="parse_error"), (), None
    calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    offered = {str((t.get("function") or {}).get("name")) for t in view.tools}
    pairs = tuple((c["name"], c["name"]) for c in calls)
    step: dict[str, Any] = {**base, "calls": tuple(calls), "parse_ok": True}
    step["select_ok"] = all(c["name"] in offered for c in calls)
    if not step["select_ok"]:
        return StepOutcome(**step, error_category="unknown_tool"), pairs, None
    observations = rt.call_all(proposal.raw, run_id=run_id) if calls else []
    failed = deciding_error(observations)
    step["args_ok"] = failed is None or failed.category != "invalid_arguments"
    step["exec_ok"] = failed is None if step["args_ok"] else None
    step["error_category"] = failed.category if failed is not None else None
    step["sent"] = failed is None or not never_sent(failed)
    task_ok = bool(step["exec_ok"]) and answer_found(parsed.content or "", answers)
    return StepOutcome(**step), pairs, task_ok if step["exec_ok"] else None


def _printable(raw: Any) -> Any:
    return raw if isinstance(raw, str | dict | list) else repr(raw)


def ground_truth_policy(suite: Suite) -> ScriptedPolicy:
    """A policy that answers every task with its ground truth (the first acceptable value of each
    argument; arguments whose acceptable values include ``""`` are left out), as an OpenAI
    assistant message; no call where none is right, nor after the task's last turn (a multi-step
    task then ends with the model's answer). Played through a session (``view.user_turn`` set),
    each user turn's calls are proposed at its first step and the next step answers."""

    def answer(view: PolicyView) -> Proposal | None:
        task = suite.task(view.task_id)
        at = view.turn if view.user_turn is None else view.user_turn
        if at >= task.turns or (view.user_turn is not None and view.step > 0):
            return None  # in a session, each user turn's calls are proposed once, then answered
        if task.answers:
            return Proposal(raw={"role": "assistant", "content": f"The answer is {task.answers[0]}."})
        turn = task.possible_answers(at)
        if not turn:
            return None
        tool_calls = []
        required = _required(view)
        for i, call in enumerate(turn):
            ((name, spec),) = call.items()
            arguments = ground_truth_arguments(spec, required.get(name, ()))
            tool_calls.append(
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            )
        return Proposal(raw={"role": "assistant", "content": None, "tool_calls": tool_calls})

    return ScriptedPolicy(answer, independent=True)


def _required(view: PolicyView) -> dict[str, tuple[str, ...]]:
    """Per offered tool, its required arguments."""
    out: dict[str, tuple[str, ...]] = {}
    for tool in view.tools:
        function = tool.get("function") or {}
        params = function.get("parameters") or {}
        out[str(function.get("name"))] = tuple(params.get("required") or ())
    return out
