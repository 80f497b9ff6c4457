"""What one evaluated task produced, layer by layer: the record every evaluation report is built from.

An evaluation runs a policy (the model) on a task through the real runtime and keeps, for every
step, which layers passed. The layers are ordered and each is only meaningful if the previous one
passed:

``parse`` (the raw output held a well-formed call, or rightly none) → ``select`` (the right tool,
or rightly no tool) → ``args`` (arguments acceptable for the task) → ``exec`` (the call ran without
error) → ``task`` (the final state / answer is what the task expects).

``exec`` judges execution, so a call that did not run because a person or the policy has the say is
no execution failure: one the policy refused (a denied approval, a missing scope, information flow,
budget) is ``refused`` and passes ``exec`` (the runtime did what it must; whether the task got done
is then for ``task`` to say); one waiting for approval is ``pending`` and one whose commit nobody
can establish is ``unknown_commit``, both undecided (:data:`EXEC_UNDECIDED`); so is one the runtime
closed before it was sent (``cancelled``, ``details["sent"]`` False: ``not_sent``), since nothing
ran. A later step that runs without error settles a wait (an approval granted, then the call run,
is a success).

Records are plain frozen dataclasses with ``to_dict`` / ``from_dict`` so they can be written to
``outcomes.jsonl`` and read back by the report and monitoring code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from actionspace.errors import ActionError
    from actionspace.runtime import Runtime
    from actionspace.types import Observation

__all__ = [
    "CATEGORIES",
    "EXEC_UNDECIDED",
    "LAYERS",
    "UNDECIDED_CATEGORIES",
    "Category",
    "ExecState",
    "Layer",
    "StepOutcome",
    "TaskOutcome",
    "deciding_error",
    "never_sent",
    "tool_versions",
]

Layer = Literal["parse", "select", "args", "exec", "task"]
LAYERS: tuple[Layer, ...] = ("parse", "select", "args", "exec", "task")

Category = Literal["normal", "no_tool", "info_missing", "permission_missing", "near_name"]
CATEGORIES: tuple[Category, ...] = ("normal", "no_tool", "info_missing", "permission_missing", "near_name")
"""``normal``: a tool call is expected. ``no_tool``: answering without a tool is right.
``info_missing``: the request lacks a required fact; asking for it is right, guessing is wrong.
``permission_missing``: the principal may not do it; not calling (or a denied call) is right.
``near_name``: a tool with a confusable name is offered next to the right one."""

ExecState = Literal["ok", "failed", "pending", "refused", "unknown_commit", "not_sent"]
EXEC_UNDECIDED: tuple[ExecState, ...] = ("pending", "unknown_commit", "not_sent")
"""Exec states that are neither a success nor an execution failure: left out of the exec and task
rates and counted beside them. (``refused`` is decided: it passes ``exec``, and ``task`` judges
what the refusal left undone.) ``not_sent``: the runtime closed before the call began."""
_UNDECIDED_BY_CATEGORY: Mapping[str, ExecState] = {
    "needs_approval": "pending",
    "permission_denied": "refused",
    "policy_violation": "refused",
    "budget_exceeded": "refused",
    "unknown_commit": "unknown_commit",
}

UNDECIDED_CATEGORIES: frozenset[str] = frozenset(
    category for category, state in _UNDECIDED_BY_CATEGORY.items() if state in EXEC_UNDECIDED
)
"""Error categories that leave a call undecided (``needs_approval``, ``unknown_commit``): monitoring
counts such calls apart from failures, as the metrics leave them out of the ``exec`` rate."""


def never_sent(error: ActionError) -> bool:
    """A call the runtime closed before it began: ``cancelled`` with ``details["sent"]`` False (or a
    plan node removed before dispatch, ``details["phase"] == "not_dispatched"``). Nothing ran."""
    details = error.details
    return error.category == "cancelled" and (
        details.get("sent") is False or details.get("phase") == "not_dispatched"
    )


def deciding_error(observations: Iterable[Observation]) -> ActionError | None:
    """The error a step of several calls is judged by: the first execution failure, else the first
    undecided error (a wait for approval, a refusal, an unknown commit, a call never sent); None
    when every call is ok."""
    errors = [o.error for o in observations if o.error is not None]
    failures = (e for e in errors if e.category not in _UNDECIDED_BY_CATEGORY and not never_sent(e))
    return next(failures, errors[0] if errors else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOutcome:
    """One model turn: its raw output, what it parsed to, and how the runtime judged it."""

    index: int
    raw: Any = None
    """The policy's raw output for this turn (text or provider message)."""
    calls: tuple[Mapping[str, Any], ...] = ()
    """Parsed calls as ``{"name", "arguments"}``, in order."""
    expected_tools: tuple[str, ...] = ()
    """Tools an acceptable answer of this turn calls (empty: no call is right)."""
    parse_ok: bool = True
    select_ok: bool | None = None
    """None when the layer was not reached (an earlier layer failed)."""
    args_ok: bool | None = None
    exec_ok: bool | None = None
    error_category: str | None = None
    """The runtime's ActionError category for the turn's failed call that decides it (see
    :func:`deciding_error`), if any."""
    confidence: float | None = None
    """The policy's confidence in its tool choice (from logprobs), when the policy reports one."""
    tokens: int | None = None
    recovered: bool = False
    """This turn followed an error and was an allowed recovery that succeeded."""
    gate: tuple[str, ...] = ()
    """Per call, what a run-time confidence gate decided (``execute``, ``ask_user``,
    ``observe_more``); empty when the run was not gated."""
    sent: bool = True
    """Whether the call that decides the step was sent; False for one the runtime closed before it
    began (:func:`never_sent`): the step is then ``not_sent`` at ``exec``. Default True."""

    @property
    def exec_state(self) -> ExecState | None:
        """How the step fared at ``exec``; None when it was not judged there. A failed step is
        ``pending``, ``refused`` or ``unknown_commit`` when its error category says so, and
        ``not_sent`` when its deciding call was never sent (:attr:`sent`)."""
        if self.exec_ok is None:
            return None
        if self.exec_ok:
            return "ok"
        if not self.sent:
            return "not_sent"
        return _UNDECIDED_BY_CATEGORY.get(self.error_category or "", "failed")

    @property
    def failed(self) -> bool:
        """The step left the reference path: it failed ``parse``, ``select`` or ``args``, or its
        execution failed. A wait for approval, a refusal by policy and an unknown commit are not
        failures (as :meth:`exec_state` reads them)."""
        return False in (self.parse_ok, self.select_ok, self.args_ok) or self.exec_state == "failed"

    @property
    def erred(self) -> bool:
        """Its error asks the model to act, so a step after it may recover: a failure, or a refusal
        by policy (the model may take another path). A wait for approval, an unknown commit and a
        call never sent are undecided, for a person or the runtime to settle: no error to recover
        from."""
        if self.error_category is None or not self.sent:
            return False
        return _UNDECIDED_BY_CATEGORY.get(self.error_category) not in EXEC_UNDECIDED

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "raw": self.raw,
            "calls": [dict(c) for c in self.calls],
            "expected_tools": list(self.expected_tools),
            "parse_ok": self.parse_ok,
            "select_ok": self.select_ok,
            "args_ok": self.args_ok,
            "exec_ok": self.exec_ok,
            "error_category": self.error_category,
            "confidence": self.confidence,
            "tokens": self.tokens,
            "recovered": self.recovered,
            "gate": list(self.gate),
            **({} if self.sent else {"sent": False}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StepOutcome:
        return cls(
            index=int(data["index"]),
            raw=data.get("raw"),
            calls=tuple(dict(c) for c in data.get("calls", ())),
            expected_tools=tuple(data.get("expected_tools", ())),
            parse_ok=bool(data.get("parse_ok", True)),
            select_ok=data.get("select_ok"),
            args_ok=data.get("args_ok"),
            exec_ok=data.get("exec_ok"),
            error_category=data.get("error_category"),
            confidence=data.get("confidence"),
            tokens=data.get("tokens"),
            recovered=bool(data.get("recovered", False)),
            gate=tuple(str(g) for g in data.get("gate", ())),
            sent=data.get("sent") is not False,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskOutcome:
    """One task of a suite under one policy (and one ablation variant)."""

    suite: str
    task_id: str
    category: Category = "normal"
    variant: str = "baseline"
    """``baseline`` or the ablation that produced this run (``names_hidden``, ``enums_dropped`` …)."""
    steps: tuple[StepOutcome, ...] = ()
    task_ok: bool | None = None
    """The final-state / answer predicate; None when the run never got that far."""
    run_id: str | None = None
    """The runtime run whose trace holds every decision of this task."""
    incidents: tuple[str, ...] = ()
    """Side-effect incidents: ``write_in_negative_task``, ``forbidden_effect``, ``duplicate_effect``."""
    extra_calls: int = 0
    """Calls spent on speculation beyond the one that counted."""
    chosen: tuple[tuple[str, str], ...] = ()
    """(expected tool, chosen tool) pairs, for the confusion matrix; ``"<none>"`` for no call."""
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def exec_state(self) -> ExecState | None:
        """The task's state at ``exec``: ``failed`` when a step failed; else None when a step was
        not judged there; else the last judged step's (a wait or refusal a later step ran past is
        settled by it); None without judged steps."""
        states = [s.exec_state for s in self.steps]
        if "failed" in states:
            return "failed"
        if not states or None in states:
            return None
        return states[-1]

    def layer(self, name: Layer) -> bool | None:
        """Did the task pass ``name`` (every step up to that layer)? None when not reached, and at
        ``exec`` when the outcome is undecided (:data:`EXEC_UNDECIDED`)."""
        if name == "task":
            return self.task_ok
        if name == "exec":
            state = self.exec_state
            return None if state is None or state in EXEC_UNDECIDED else state in ("ok", "refused")
        attr = {"parse": "parse_ok", "select": "select_ok", "args": "args_ok", "exec": "exec_ok"}[name]
        values = [getattr(s, attr) for s in self.steps]
        if not values:
            return None
        if any(v is False for v in values):
            return False
        if any(v is None for v in values):
            return None
        return True

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "task_id": self.task_id,
            "category": self.category,
            "variant": self.variant,
            "steps": [s.to_dict() for s in self.steps],
            "task_ok": self.task_ok,
            "run_id": self.run_id,
            "incidents": list(self.incidents),
            "extra_calls": self.extra_calls,
            "chosen": [list(p) for p in self.chosen],
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskOutcome:
        return cls(
            suite=str(data["suite"]),
            task_id=str(data["task_id"]),
            category=data.get("category", "normal"),
            variant=str(data.get("variant", "baseline")),
            steps=tuple(StepOutcome.from_dict(s) for s in data.get("steps", ())),
            task_ok=data.get("task_ok"),
            run_id=data.get("run_id"),
            incidents=tuple(data.get("incidents", ())),
            extra_calls=int(data.get("extra_calls", 0)),
            chosen=tuple((str(a), str(b)) for a, b in data.get("chosen", ())),
            details=dict(data.get("details") or {}),
        )


def outcomes_to_jsonl(outcomes: Sequence[TaskOutcome]) -> str:
    """One JSON object per line."""
    import json

    return "".join(json.dumps(o.to_dict(), default=str) + "\n" for o in outcomes)


def tool_versions(rt: Runtime, names: Iterable[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"key": "name@version", "schema_hash": …}}`` of the tools ``rt`` offers now.

    ``names`` (default None: every offerable tool of the catalog) keeps only those names, in
    catalog order; a name the catalog does not offer (retired, unknown, or a meta-tool such as
    ``describe_tool``) is left out.
    """
    wanted = None if names is None else set(names)
    return {
        spec.name: {"key": spec.key, "schema_hash": spec.schema_hash}
        for spec in rt.catalog.offerable()
        if wanted is None or spec.name in wanted
    }
