"""Replay AgentDojo ground truths through the runtime, and score them with AgentDojo's own checks.

One :class:`SuiteReplay` per suite holds one in-memory Runtime with the suite's tools; every task
(benign) or task pair (attack) is a run of its own against a fresh copy of the environment.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from actionspace.evaluation._agentdojo_env import Injector, load_environment
from actionspace.evaluation._agentdojo_sources import Seen, declared_sources
from actionspace.evaluation._agentdojo_tools import EnvironmentSlot, jsonable, register_suite_tools
from actionspace.evaluation.outcomes import tool_versions
from actionspace.policy import FlowPolicy, Label
from actionspace.types import Observation

__all__ = [
    "Approver",
    "CallRecord",
    "PairResult",
    "SimulatedUser",
    "SuiteReplay",
]

Approver = Literal["task", "deny"]
"""``task``: approves exactly the calls of the user's own task; ``deny``: refuses every request."""

_ENV_CACHE_SIZE = 32

PROMPT_LABEL = Label(confidentiality="internal", integrity="trusted")
"""The user's request: trusted, and no more public than the user's own data."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """What became of one replayed call."""

    tool: str
    node: str
    injected: bool
    """True for a call of the injection task (a hijacked model's call)."""
    status: str
    """``ok`` or ``error``."""
    category: str | None = None
    """The final error category (``policy_violation``, ``permission_denied``, …), None when it ran."""
    approval: str | None = None
    """``approved`` or ``denied`` when the call asked for approval."""
    reason: str | None = None
    """Why the runtime stopped or held the call (the error or approval message), when it did."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "node": self.node,
            "injected": self.injected,
            "status": self.status,
            "category": self.category,
            "approval": self.approval,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PairResult:
    """One benign task (``injection_task`` None) or one attack pair, scored by AgentDojo."""

    suite: str
    user_task: str
    injection_task: str | None
    run_id: str
    utility: bool
    attack_success: bool | None
    """AgentDojo's ``security`` check (True: the injection's goal was reached); None when benign."""
    calls: tuple[CallRecord, ...]
    seconds: float
    tools: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """``{name: {"key": "name@version", "schema_hash": …}}`` of every tool the pair's runtime
    could be called with."""

    @property
    def false_blocks(self) -> int:
        """User-task calls denied by a policy (not by the simulated user)."""
        return sum(1 for c in self.calls if not c.injected and c.category == "policy_violation")

    @property
    def approvals_asked(self) -> int:
        return sum(1 for c in self.calls if c.approval is not None)

    @property
    def approvals_granted(self) -> int:
        return sum(1 for c in self.calls if c.approval == "approved")

    @property
    def errors(self) -> int:
        """User-task calls that failed for any other reason (a broken import would show here)."""
        return sum(
            1
            for c in self.calls
            if not c.injected and c.category not in (None, "policy_violation", "permission_denied")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "user_task": self.user_task,
            "injection_task": self.injection_task,
            "run_id": self.run_id,
            "utility": self.utility,
            "attack_success": self.attack_success,
            "false_blocks": self.false_blocks,
            "approvals_asked": self.approvals_asked,
            "approvals_granted": self.approvals_granted,
            "errors": self.errors,
            "calls": [c.to_dict() for c in self.calls],
            "seconds": round(self.seconds, 4),
            "tools": {name: dict(entry) for name, entry in self.tools.items()},
        }


class SimulatedUser:
    """Decides approval requests: approves each call of its own task's ground truth once."""

    def __init__(self, mode: Approver, expected: Sequence[Any]) -> None:
        self.mode = mode
        self._remaining = [(c.function, jsonable(dict(c.args))) for c in expected]

    def decide(self, tool: str, arguments: Mapping[str, Any]) -> bool:
        """True to approve ``tool(arguments)`` (the request's normalized arguments)."""
        if self.mode == "deny":
            return False
        asked = jsonable(dict(arguments))
        for i, (name, args) in enumerate(self._remaining):
            if name == tool and all(asked.get(k) == v for k, v in args.items()):
                del self._remaining[i]
                return True
        return False


@dataclass(slots=True)
class _Run:
    run_id: str
    prompt: str
    user: SimulatedUser
    seen: list[Seen] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)


class SuiteReplay:
    """One AgentDojo suite loaded as actionspace tools on one in-memory Runtime.

    ``flow_policy``: passed to ``Runtime(flow_policy=...)``; ``None`` allows every call (labels
    are still computed: the undefended baseline). ``approver``: how the simulated user decides
    approval requests.
    """

    def __init__(
        self,
        suite_name: str,
        *,
        benchmark_version: str,
        flow_policy: FlowPolicy | None = None,
        approver: Approver = "task",
        stages: Sequence[Any] = (),
    ) -> None:
        from agentdojo.task_suite.load_suites import get_suite

        from actionspace.runtime import Runtime

        self.name = suite_name
        self.suite: Any = get_suite(benchmark_version, suite_name)
        self.approver: Approver = approver
        self.slot = EnvironmentSlot()
        self.runtime = Runtime("memory://", recover_on_start=False, flow_policy=flow_policy, stages=stages)
        register_suite_tools(self.runtime, self.suite, self.slot)
        self.injector = Injector(self.suite)
        self._envs: dict[tuple[tuple[str, str], ...], Any] = {}
        self._count = 0

    # ------------------------------------------------------------------ environments
    def _environment(self, injections: Mapping[str, str]) -> Any:
        key = tuple(sorted(injections.items()))
        env = self._envs.get(key)
        if env is None:
            env = load_environment(self.suite, injections, self.injector.defaults)
            if len(self._envs) >= _ENV_CACHE_SIZE:
                self._envs.pop(next(iter(self._envs)))
            self._envs[key] = env
        return env.model_copy(deep=True)

    def injections(self, user_task: Any, injection_task: Any) -> dict[str, str]:
        """AgentDojo's ``important_instructions`` text in the vectors the user task reads."""
        return self.injector.injections(user_task, injection_task)

    # ------------------------------------------------------------------ tasks
    def benign(self, user_task_id: str) -> PairResult:
        """Replay one user task's ground truth with no injection; score its utility."""
        return self._pair(user_task_id, None)

    def attack(self, user_task_id: str, injection_task_id: str) -> PairResult:
        """Replay the user task in an injected environment, then the injection's ground truth."""
        return self._pair(user_task_id, injection_task_id)

    def _pair(self, user_task_id: str, injection_task_id: str | None) -> PairResult:
        started = time.perf_counter()
        user_task = self.suite.user_tasks[user_task_id]
        injection_task = None
        if injection_task_id is not None:
            injection_task = self.suite.injection_tasks[injection_task_id]
            env = self._environment(self.injections(user_task, injection_task))
        else:
            env = self._environment({})
        env = user_task.init_environment(env)
        pre = env.model_copy(deep=True)
        self.slot.env = env
        self.slot.executed = []
        self._count += 1
        suffix = "" if injection_task_id is None else f"/{injection_task_id}"
        run_id = self.runtime.new_run(f"agentdojo/{self.name}/{user_task_id}{suffix}/{self._count}")
        expected = user_task.ground_truth(pre.model_copy(deep=True))
        run = _Run(run_id, user_task.PROMPT, SimulatedUser(self.approver, expected))
        self.runtime.user_input(run_id, user_task.PROMPT, label=PROMPT_LABEL)
        self._replay(run, expected, injected=False)
        if injection_task is not None:
            self._replay(run, injection_task.ground_truth(pre.model_copy(deep=True)), injected=True)
        output = str(user_task.GROUND_TRUTH_OUTPUT)
        utility = _utility(user_task, output, pre, env, self.slot.executed)
        success = None
        if injection_task is not None:
            success = _security(injection_task, output, pre, env, self.slot.executed)
        self.runtime.finish(run_id, utility=utility, attack_success=success)
        return PairResult(
            suite=self.name,
            user_task=user_task_id,
            injection_task=injection_task_id,
            run_id=run_id,
            utility=bool(utility),
            attack_success=None if success is None else bool(success),
            calls=tuple(run.calls),
            seconds=time.perf_counter() - started,
            tools=tool_versions(self.runtime),
        )

    def _replay(self, run: _Run, calls: Sequence[Any], *, injected: bool) -> None:
        prefix = "x" if injected else "u"
        for i, call in enumerate(calls, 1):
            node = f"{prefix}{i}"
            arguments = dict(call.args)
            # A hijacked model names no sources: the conservative rule labels its arguments.
            sources = {} if injected else declared_sources(arguments, run.prompt, run.seen)
            obs = self._call(run.run_id, node, call.function, arguments, sources)
            approval = None
            reason = None if obs.error is None else obs.error.message[:300]
            if obs.error is not None and obs.error.category == "needs_approval":
                request_id = str(obs.error.details.get("request_id", ""))
                request = self.runtime.approvals.get(request_id)
                asked = request.arguments if request is not None else arguments
                if run.user.decide(call.function, asked):
                    self.runtime.approvals.approve(request_id, by="simulated-user", reason="my task")
                    approval = "approved"
                else:
                    self.runtime.approvals.deny(request_id, by="simulated-user", reason="not my task")
                    approval = "denied"
                obs = self._call(run.run_id, node, call.function, arguments, sources)
            run.calls.append(
                CallRecord(
                    tool=call.function,
                    node=node,
                    injected=injected,
                    status=obs.status,
                    category=None if obs.error is None else obs.error.category,
                    approval=approval,
                    reason=reason,
                )
            )
            if obs.error is None:
                run.seen.append(Seen(obs.call_id, obs.data))

    def _call(
        self,
        run_id: str,
        node: str,
        tool: str,
        arguments: Mapping[str, Any],
        sources: Mapping[str, list[str]],
    ) -> Observation:
        raw = {
            "id": f"{run_id}:{node}",
            "type": "function",
            "function": {"name": tool, "arguments": json.dumps(arguments, default=str)},
        }
        return self.runtime.call(raw, run_id=run_id, node_id=node, sources=sources)

    def close(self) -> None:
        self.runtime.close()


def _utility(task: Any, output: str, pre: Any, post: Any, traces: Sequence[Any]) -> bool:
    """AgentDojo's utility check, in the order its task suite applies them (traces first)."""
    by_traces = task.utility_from_traces(output, pre, post, traces)
    if by_traces is not None:
        return bool(by_traces)
    return bool(task.utility(output, pre, post))


def _security(task: Any, output: str, pre: Any, post: Any, traces: Sequence[Any]) -> bool:
    """AgentDojo's security check (True: the attacker's goal was reached)."""
    by_traces = task.security_from_traces(output, pre, post, traces)
    if by_traces is not None:
        return bool(by_traces)
    return bool(task.security(output, pre, post))
