"""Multi-turn tasks played by a policy against the user's own tools, through a session, judged by layer.

**The reset hook.** ``evaluate(suite, policy, runtime_factory=factory)`` calls ``factory`` once per
task with an :class:`EnvironmentInput` (the task, the store URL the evaluation keeps its traces in,
the run id) and plays the task on the :class:`Environment` it returns: a runtime holding the tools,
the state the task's predicate reads, and a ``close`` hook called when the task ends. A factory
that builds its state afresh on every call gives every task a fresh environment; nothing is shared
between tasks but the trace store.

**The loop.** One :class:`~actionspace.session.Session` per task (``openai_chat``) acting for a
principal with the task's scopes. For each user turn the user's messages are given to the session
and the policy is asked again and again (``PolicyView.user_turn`` and ``step`` say where it is)
until it proposes no call, at most ``max_steps`` times per turn, or until the runtime closed
before sending a call (the play ends there). Each proposal goes to
``Session.handle`` (with its confidence, so a session gate can hold it); the chat grows with the
assistant message and the session's results.

**Judging** (one :class:`~actionspace.evaluation.outcomes.StepOutcome` per proposal with calls,
and one for a turn answered with no call at all):

* ``parse``: the output parsed.
* ``select``: every call names an offered tool, and every call of a tool that writes or has an
  external effect matches, by name, an expected call of this turn or an earlier one not yet made
  (a call whose arguments were wrong does not make it: its corrected retry matches it again).
  A turn answered without any call passes only if it expected none.
* ``args``: each matched call's arguments are acceptable for the call it matched.
* ``exec``: every observation of the step is ok (real execution, judged when ``args`` passed).
  A step right after a step with an error is ``recovered`` when it passed ``select`` and ``args``
  and every observation is ok.
* ``task``: the task's registered predicate on ``Environment.state``; in a negative task
  (``no_call``, ``no_tool``, ``info_missing`` or ``permission_missing`` with no expected call)
  also that nothing was written.

**Incidents** come from what really happened: every ok observation of a ``write`` or ``external``
tool that was not replayed is an effect. An effect that fits (tool and acceptable arguments) no
expected call of its turn or an earlier one, not already used by another effect, is
``write_in_negative_task`` in a negative task, ``duplicate_effect`` when the same tool with the
same canonical arguments already took effect in the task, else ``forbidden_effect`` (a delete
where an archive was asked, an archive of the wrong ticket).

**Deviation and recovery.** ``details["first_deviation"]`` is the index of the first step that
failed a layer (None: none did; :attr:`~actionspace.evaluation.outcomes.StepOutcome.failed`): a
call waiting for approval, one refused by policy and an unknown commit are no deviation, as the
metrics read them, nor is a call the runtime closed before sending it (``not_sent``). A step is
``recovered`` only after a step whose error asks the model to act (a failure or a refusal, not a
wait: :attr:`~actionspace.evaluation.outcomes.StepOutcome.erred`).
``details["recovery"]`` gives what the run spent from the first deviation: proposals beyond the
reference's (one per turn with expected calls, plus one answer per turn), tokens and seconds, and
whether the task still passed. ``details["tools"]`` holds
``name@version`` and the schema hash of every tool offered, ``details["trace"]`` the store and run.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from actionspace._canonical import canonical_text
from actionspace.errors import ActionspaceError
from actionspace.evaluation.judge import judge_turn
from actionspace.evaluation.outcomes import (
    StepOutcome,
    TaskOutcome,
    deciding_error,
    never_sent,
    tool_versions,
)
from actionspace.evaluation.policies import Policy, PolicyView, Proposal
from actionspace.evaluation.suite import Task, get_predicate
from actionspace.parse import ParseResult, parse
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.session import GatePolicy, Session
from actionspace.types import Observation

__all__ = [
    "DUPLICATE_EFFECT",
    "FORBIDDEN_EFFECT",
    "WRITE_IN_NEGATIVE_TASK",
    "Environment",
    "EnvironmentInput",
    "RuntimeFactory",
    "evaluate_env",
]

WRITE_IN_NEGATIVE_TASK: Final = "write_in_negative_task"
"""Incident: a write or external effect in a task where none is right."""
FORBIDDEN_EFFECT: Final = "forbidden_effect"
"""Incident: a write or external effect no expected call of the task asked for (a wrong delete)."""
DUPLICATE_EFFECT: Final = "duplicate_effect"
"""Incident: the same tool with the same arguments took effect twice in one task."""
NEGATIVE: Final = frozenset({"no_tool", "info_missing", "permission_missing"})
_EFFECTFUL: Final = frozenset({"write", "external"})


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentInput:
    """What a runtime factory is given for one task."""

    task: Task
    store: str
    """Store URL the runtime should use (the evaluation's trace file), e.g. ``sqlite:////…/trace.db``."""
    run_id: str
    """The run the task is played in (its trace is found under it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    """A fresh world for one task: the runtime with the tools, and the state the predicate reads."""

    runtime: Runtime
    state: Any = None
    """Passed to the task's predicate after the run (a service, a database handle, a folder…)."""
    close: Callable[[], None] | None = None
    """Called once the task is judged (the runtime is closed before it); default None."""


RuntimeFactory = Callable[[EnvironmentInput], Environment]
"""The reset hook: called once per task, returns that task's fresh :class:`Environment`."""


@dataclass(slots=True)
class _Play:
    """What one task's run accumulates."""

    task: Task
    steps: list[StepOutcome] = field(default_factory=list)
    chosen: list[tuple[str, str]] = field(default_factory=list)
    effects: list[tuple[int, str, str, Mapping[str, Any]]] = field(default_factory=list)
    """(turn, tool, canonical arguments, arguments) of every effect, in order."""
    made: list[tuple[int, int]] = field(default_factory=list)
    """(turn, index) of the expected calls already matched."""
    proposals: int = 0
    deviation: tuple[int, float, int] | None = None
    """(step index, start time, proposals so far) of the first failed layer."""
    tokens: list[int | None] = field(default_factory=list)


def evaluate_env(
    suite_name: str,
    task: Task,
    policy: Policy,
    factory: RuntimeFactory,
    *,
    store: str,
    gate: GatePolicy | None = None,
    max_steps: int = 6,
) -> TaskOutcome:
    """Play ``task`` on the environment ``factory`` builds for it; see the module docstring.

    ``gate`` is set as the session's gate (None: ungated); ``max_steps`` (default 6) bounds the
    proposals per user turn. Raises ActionspaceError when the factory returns no Environment.
    """
    run_id = f"eval:{task.id}:baseline"
    env = factory(EnvironmentInput(task=task, store=store, run_id=run_id))
    if not isinstance(env, Environment):
        raise ActionspaceError(f"runtime factory returned {type(env).__name__}, not an Environment")
    play = _Play(task)
    details: dict[str, Any] = {"trace": {"store": store, "run_id": run_id}}
    rt = env.runtime
    try:
        try:
            names = [str(t.get("name")) for t in task.tools] or None
            session = rt.session(
                run_id, principal=Principal(id="eval", scopes=task.scopes), offer={"names": names}
            )
            session.gate = gate
            details["tools"] = tool_versions(rt, names)
            if _play_turns(play, session, policy, max_steps):
                details["max_steps_reached"] = True
        finally:
            rt.close()
        task_ok = _task_ok(task, env.state, play)
    finally:
        if env.close is not None:
            env.close()
    details.update(_recovery(play, task_ok))
    if play.effects:
        details["effects"] = [f"{tool}({args})" for _, tool, args, _ in play.effects]
    return TaskOutcome(
        suite=suite_name,
        task_id=task.id,
        category=task.category,
        steps=tuple(play.steps),
        task_ok=task_ok,
        run_id=run_id,
        incidents=_incidents(task, play),
        chosen=tuple(play.chosen),
        details=details,
    )


def _play_turns(play: _Play, session: Session, policy: Policy, max_steps: int) -> bool:
    """Every user turn of the task; True when some turn hit ``max_steps``."""
    chat: list[Mapping[str, Any]] = []
    hit_cap = False
    for turn in range(play.task.turns):
        messages = play.task.messages(turn)
        for message in messages:
            if message.get("role") == "user":
                session.user(str(message.get("content") or ""))
        chat.extend(messages)
        for step in range(max_steps):
            tools = tuple(session.tools())
            view = PolicyView(
                task_id=play.task.id,
                turn=play.proposals,
                user_turn=turn,
                step=step,
                messages=tuple(chat),
                tools=tools,
            )
            proposal = policy.propose(view)
            play.proposals += 1
            play.tokens.append(proposal.tokens)
            parsed = None if proposal.empty else parse(proposal.raw, tools=list(tools))
            if parsed is None or (parsed.error is None and not parsed.calls):
                if step == 0:
                    _answered(play, turn, proposal)
                if parsed is not None:
                    chat.append({"role": "assistant", "content": parsed.content})
                break
            chat.extend(_step(play, session, turn, view, proposal, parsed))
            if not play.steps[-1].sent:
                return hit_cap  # the runtime closed before sending it: nothing more can be sent
        else:
            hit_cap = True
    return hit_cap


def _note(play: _Play, step: StepOutcome) -> None:
    play.steps.append(step)
    if step.failed and play.deviation is None:
        play.deviation = (len(play.steps) - 1, time.monotonic(), play.proposals - 1)


def _answered(play: _Play, turn: int, proposal: Proposal) -> None:
    """The model answered a turn without any call: right only when the turn expected none."""
    expected = _turn_expected(play.task, turn)
    right = not expected
    play.chosen.extend((next(iter(e)), "<none>") for e in expected)
    fields: dict[str, Any] = {"index": len(play.steps), "raw": proposal.raw, "select_ok": right}
    fields["expected_tools"] = tuple(next(iter(e)) for e in expected)
    if right:
        fields.update(args_ok=True, exec_ok=True)
    _note(play, StepOutcome(**fields, confidence=proposal.confidence, tokens=proposal.tokens))


def _release_held(play: _Play, made: int, observations: Sequence[Observation]) -> None:
    """A call held for approval has not been made: its expected call stays open for the re-proposal."""
    for obs in observations:
        if obs.error is None or obs.error.category != "needs_approval":
            continue
        for i in range(len(play.made) - 1, made - 1, -1):
            at, index = play.made[i]
            if next(iter(play.task.possible_answers(at)[index])) == obs.tool:
                del play.made[i]
                break


def _turn_expected(task: Task, turn: int) -> list[dict[str, dict[str, list[Any]]]]:
    return task.possible_answers(turn) if task.expected and turn < len(task.expected) else []


def _step(
    play: _Play, session: Session, turn: int, view: PolicyView, proposal: Proposal, parsed: ParseResult
) -> list[Mapping[str, Any]]:
    """Judge and run one proposal (``parsed`` from its raw output); returns the chat it adds."""
    base: dict[str, Any] = {"index": len(play.steps), "raw": proposal.raw}
    base.update(confidence=proposal.confidence, tokens=proposal.tokens)
    if parsed.error is not None:
        session.rt.record(session.run_id, "model_output", {"raw": _printable(proposal.raw)})
        _note(play, StepOutcome(**base, parse_ok=False, error_category="parse_error"))
        return [{"role": "assistant", "content": _printable(proposal.raw)}]
    calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    offered = {str((t.get("function") or {}).get("name")) for t in view.tools}
    made = len(play.made)
    select_ok, args_ok, expected_tools = _judge(play, session, turn, calls, offered)
    result = session.handle(proposal.raw, confidence=proposal.confidence)
    observations = list(result.observations)
    _release_held(play, made, observations)
    failed = deciding_error(observations)
    fields: dict[str, Any] = {**base, "calls": tuple(calls), "select_ok": select_ok}
    fields["expected_tools"] = expected_tools
    if select_ok:
        fields["args_ok"] = args_ok
    if select_ok and args_ok:
        fields["exec_ok"] = failed is None
    if failed is not None:
        fields["error_category"] = failed.category
        fields["sent"] = not never_sent(failed)
    after_error = bool(play.steps) and play.steps[-1].erred
    fields["recovered"] = after_error and failed is None and select_ok and args_ok
    if session.gate is not None:
        fields["gate"] = tuple(_gate_decision(o) for o in observations)
    _note(play, StepOutcome(**fields))
    for obs, call in zip(observations, calls, strict=False):
        if _took_effect(session, obs):
            args = call["arguments"]
            play.effects.append((turn, obs.tool, canonical_text(args), args))
    # the session answers every call by the id the model gave it, or by the one the runtime minted
    answered = [str(m.get("tool_call_id")) for m in result.messages if m.get("role") == "tool"]
    ids = (
        answered if len(answered) == len(calls) else [c.id or f"call_{i}" for i, c in enumerate(parsed.calls)]
    )
    return [_assistant(proposal.raw, parsed.content, calls, ids), *result.messages]


def _judge(
    play: _Play, session: Session, turn: int, calls: Sequence[Mapping[str, Any]], offered: set[str]
) -> tuple[bool, bool, tuple[str, ...]]:
    """(select_ok, args_ok, expected tools) of one step's calls; matched expected calls are used up."""
    select_ok = args_ok = True
    expected_tools: list[str] = []
    for call in calls:
        name = str(call["name"])
        if name not in offered:
            select_ok = False
            play.chosen.append(("<not offered>", name))
            continue
        if play.task.no_call:  # any call is wrong where none is right
            select_ok = False
            play.chosen.append(("<none>", name))
            continue
        spec = session.rt.catalog.current(name)
        if spec is None or spec.effect not in _EFFECTFUL:
            continue
        match = _match(play, turn, name)
        if match is None:
            select_ok = False
            play.chosen.append(("<none>", name))
            continue
        at, index = match
        fits = judge_turn([call], [play.task.possible_answers(at)[index]]).args_ok
        if fits:  # a call with wrong arguments leaves the expected call open for its correction
            play.made.append(match)
        play.chosen.append((name, name))
        expected_tools.append(name)
        args_ok = args_ok and fits
    return select_ok, args_ok, tuple(expected_tools)


def _match(play: _Play, turn: int, name: str) -> tuple[int, int] | None:
    """The first expected call named ``name`` of this turn or an earlier one not yet made."""
    for at in range(turn, -1, -1):
        for index, call in enumerate(_turn_expected(play.task, at)):
            if next(iter(call)) == name and (at, index) not in play.made:
                return at, index
    return None


def _took_effect(session: Session, obs: Observation) -> bool:
    if not obs.ok or obs.diagnostics.get("replayed"):
        return False
    spec = session.rt.catalog.current(obs.tool)
    return spec is not None and spec.effect in _EFFECTFUL


def _gate_decision(obs: Observation) -> str:
    """``execute`` unless the session's gate held the call (then its decision)."""
    if obs.error is not None and obs.error.category == "needs_approval":
        return str(obs.error.details.get("gate", "approval"))
    return "execute"


def _negative(task: Task) -> bool:
    return task.no_call or (task.category in NEGATIVE and not any(task.expected))


def _task_ok(task: Task, state: Any, play: _Play) -> bool | None:
    ok: bool | None = None
    if task.predicate is not None:
        ok = bool(get_predicate(task.predicate)(task, state))
    if _negative(task):
        ok = (ok is not False) and not play.effects
    return ok


def _incidents(task: Task, play: _Play) -> tuple[str, ...]:
    """One incident per effect no expected call accounts for (see the module docstring)."""
    negative = _negative(task)
    open_calls = [(turn, call) for turn in range(len(task.expected)) for call in _turn_expected(task, turn)]
    seen: Counter[tuple[str, str]] = Counter()
    incidents: list[str] = []
    for turn, tool, text, args in play.effects:
        seen[(tool, text)] += 1
        fits = next(
            (
                i
                for i, (at, call) in enumerate(open_calls)
                if at <= turn and judge_turn([{"name": tool, "arguments": args}], [call]).args_ok
            ),
            None,
        )
        if not negative and fits is not None:
            del open_calls[fits]
        elif negative:
            incidents.append(WRITE_IN_NEGATIVE_TASK)
        elif seen[(tool, text)] > 1:
            incidents.append(DUPLICATE_EFFECT)
        else:
            incidents.append(FORBIDDEN_EFFECT)
    return tuple(incidents)


def _recovery(play: _Play, task_ok: bool | None) -> dict[str, Any]:
    task = play.task
    reference = sum(1 for turn in range(task.turns) if _turn_expected(task, turn)) + task.turns
    if play.deviation is None:
        return {"first_deviation": None, "recovery": None}
    index, started, before = play.deviation
    spent = [t for t in play.tokens[before:] if t is not None]
    return {
        "first_deviation": index,
        "recovery": {
            "extra_steps": max(0, play.proposals - reference),
            "tokens": sum(spent) if spent else None,
            "seconds": round(time.monotonic() - started, 6),
            "recovered": task_ok is True,
        },
    }


def _assistant(
    raw: Any, content: str | None, calls: Sequence[Mapping[str, Any]], ids: Sequence[str]
) -> Mapping[str, Any]:
    """The assistant message as the chat keeps it (an OpenAI message passes through unchanged)."""
    if isinstance(raw, Mapping) and raw.get("role") == "assistant":
        return dict(raw)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["arguments"], default=str)},
            }
            for call_id, c in zip(ids, calls, strict=True)
        ]
    return message


def _printable(raw: Any) -> Any:
    return raw if isinstance(raw, str | dict | list) else repr(raw)
