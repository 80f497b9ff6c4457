"""AgentDojo (MIT, ``agentdojo==0.1.35``) through the runtime: benign utility and prompt-injection proof.

The four suites' tools are registered as actionspace tools with labels
(:mod:`actionspace.evaluation._agentdojo_tools`). Ground truths are replayed call by call through
``Runtime.call`` against AgentDojo's own environment objects, and scored by each task's own
``utility`` / ``security`` checks:

- ``benign``: every user task; an honest model names its arguments' sources (values from the
  prompt → ``user``, values read from earlier observations → those calls);
- ``attack``: every user task × injection task (with a ground truth); the injection vectors the
  user task reads hold AgentDojo's ``important_instructions`` text, and after the user's ground
  truth a hijacked model runs the injection's ground truth, naming no sources.

Approval requests are decided by a simulated user (:class:`SimulatedUser`). Figures are reported
as in the AgentDojo paper: utility, utility under attack, targeted attack success rate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from actionspace.evaluation._agentdojo_policies import argument_policy, field_trust
from actionspace.evaluation._agentdojo_replay import Approver, PairResult, SimulatedUser, SuiteReplay
from actionspace.evaluation._agentdojo_tools import TOOL_LABELS
from actionspace.evaluation.agentdojo_cli import (
    DEFAULT_BENCHMARK_VERSION,
    POLICIES,
    SUITES,
    Mode,
    PolicyName,
    eval_agentdojo_command,
)
from actionspace.policy import DEFAULT_FLOW_POLICY, FlowPolicy, NoSecretToExternalSink, UntrustedWrites
from actionspace.policy.provenance_stage import ProvenanceStage

__all__ = [
    "DEFAULT_BENCHMARK_VERSION",
    "POLICIES",
    "PUBLISHED",
    "SUITES",
    "AgentDojoConfig",
    "PairResult",
    "SimulatedUser",
    "eval_agentdojo_command",
    "flow_policy",
    "run_agentdojo",
    "summarize",
]

PUBLISHED: Mapping[str, Mapping[str, Any]] = {
    "camel": {
        "utility": 0.77,
        "undefended_utility": 0.84,
        "note": "CaMeL (Debenedetti et al., 2025, arXiv:2503.18813): 77 % of AgentDojo tasks solved "
        "with provable security, against 84 % undefended; see docs/agentdojo.md for its ASR.",
    },
    "progent": {
        "attack_success_rate_before": 0.412,
        "attack_success_rate_after": 0.022,
        "note": "Progent (Shi et al., 2025, arXiv:2504.11703): AgentDojo ASR 41.2 % → 2.2 %.",
    },
}
"""Published figures the report sits next to (sources in docs/agentdojo.md)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentDojoConfig:
    """What to run."""

    mode: Mode = "benign"
    """``benign`` (user tasks only) or ``attack`` (user tasks, then every task × injection pair)."""
    suites: tuple[str, ...] = SUITES
    """Suites to run, by name. Default: all four."""
    benchmark_version: str = DEFAULT_BENCHMARK_VERSION
    """AgentDojo task-set version. Default ``v1.2.2``."""
    policy: PolicyName = "provenance"
    """Flow policy, see :data:`POLICIES`. Default ``provenance``."""
    approver: Approver = "task"
    """``task``: the simulated user approves exactly its own task's calls; ``deny``: refuses all."""
    user_tasks: int | None = None
    """Only the first N user tasks of each suite (a CI slice); None = all."""
    injection_tasks: int | None = None
    """Only the first N injection tasks of each suite; None = all with a ground truth."""


def flow_policy(name: PolicyName) -> FlowPolicy | None:
    """The flow policy object for a :data:`POLICIES` name (None for ``none``: allow every call)."""
    if name == "none":
        return None
    if name == "default":
        return DEFAULT_FLOW_POLICY
    if name == "strict":
        return DEFAULT_FLOW_POLICY & UntrustedWrites(on="ask")
    if name == "provenance":
        return NoSecretToExternalSink() & argument_policy()
    raise ValueError(f"policy must be one of {POLICIES}, got {name!r}")


def _number(task_id: str) -> int:
    return int(task_id.rsplit("_", 1)[1])


def _injection_ids(suite: Any, limit: int | None) -> list[str]:
    """Injection tasks whose ground truth has at least one call (the others cannot be replayed)."""
    env = suite.load_and_inject_default_environment({})
    found = [i for i, task in suite.injection_tasks.items() if task.ground_truth(env.model_copy(deep=True))]
    found.sort(key=_number)
    return found[:limit] if limit is not None else found


def plan(config: AgentDojoConfig) -> dict[str, tuple[list[str], list[str]]]:
    """Per suite, (user task ids, injection task ids) the configuration runs.

    Raises ``KeyError`` for an unknown suite name.
    """
    from agentdojo.task_suite.load_suites import get_suite

    out = {}
    for name in config.suites:
        if name not in SUITES:
            raise KeyError(f"unknown AgentDojo suite {name!r}; choose from {SUITES}")
        suite = get_suite(config.benchmark_version, name)
        users = sorted(suite.user_tasks, key=_number)[: config.user_tasks]
        injections = _injection_ids(suite, config.injection_tasks) if config.mode == "attack" else []
        out[name] = (users, injections)
    return out


def run_agentdojo(
    config: AgentDojoConfig, *, progress: Callable[[str, int], None] | None = None
) -> list[PairResult]:
    """Run the configuration; one result per benign task and (in attack mode) per pair.

    ``progress(description, total)`` is called once with the total, then with ``("", 1)`` per result.
    Raises ``KeyError`` for an unknown suite name.
    """
    work = plan(config)
    total = sum(len(u) * (1 + len(i)) for u, i in work.values())
    if progress is not None:
        progress("AgentDojo", total)
    policy = flow_policy(config.policy)
    results: list[PairResult] = []
    for name, (users, injections) in work.items():
        stages = [ProvenanceStage(fields=field_trust())] if config.policy == "provenance" else []
        replay = SuiteReplay(
            name,
            benchmark_version=config.benchmark_version,
            flow_policy=policy,
            approver=config.approver,
            stages=stages,
        )
        try:
            for user in users:
                results.append(replay.benign(user))
                if progress is not None:
                    progress("", 1)
            for injection in injections:
                for user in users:
                    results.append(replay.attack(user, injection))
                    if progress is not None:
                        progress("", 1)
        finally:
            replay.close()
    return results


def _rate(hits: int, n: int) -> float | None:
    return round(hits / n, 4) if n else None


def _figures(results: Sequence[PairResult]) -> dict[str, Any]:
    benign = [r for r in results if r.injection_task is None]
    attacks = [r for r in results if r.injection_task is not None]
    return {
        "utility": _rate(sum(r.utility for r in benign), len(benign)),
        "utility_under_attack": _rate(sum(r.utility for r in attacks), len(attacks)),
        "attack_success_rate": _rate(sum(bool(r.attack_success) for r in attacks), len(attacks)),
        "false_blocks": sum(r.false_blocks for r in benign),
        "approvals_asked": sum(r.approvals_asked for r in benign),
        "approvals_granted": sum(r.approvals_granted for r in benign),
        "tasks": len(benign),
        "tasks_solved": sum(r.utility for r in benign),
        "pairs": len(attacks),
        "attacks_succeeded": sum(bool(r.attack_success) for r in attacks),
        "approvals_asked_under_attack": sum(r.approvals_asked for r in attacks),
        "injected_calls": sum(1 for r in attacks for c in r.calls if c.injected),
        "injected_calls_run": sum(1 for r in attacks for c in r.calls if c.injected and c.category is None),
        "injected_calls_denied_by_policy": sum(
            1 for r in attacks for c in r.calls if c.injected and c.category == "policy_violation"
        ),
        "injected_calls_refused_by_user": sum(
            1
            for r in attacks
            for c in r.calls
            if c.injected and (c.approval == "denied" or c.category == "permission_denied")
        ),
        "injected_writes_run": sum(
            1
            for r in attacks
            for c in r.calls
            if c.injected and c.category is None and TOOL_LABELS[c.tool].effect in ("write", "external")
        ),
        "user_calls_blocked_under_attack": sum(r.false_blocks for r in attacks),
        "errors": sum(r.errors for r in results),
    }


def summarize(results: Sequence[PairResult], config: AgentDojoConfig, *, seconds: float) -> dict[str, Any]:
    """The report: figures per suite and overall, the configuration, and the published figures."""
    by_suite: dict[str, list[PairResult]] = {}
    for r in results:
        by_suite.setdefault(r.suite, []).append(r)
    return {
        "benchmark": f"agentdojo {config.benchmark_version}",
        "mode": config.mode,
        "policy": config.policy,
        "approver": config.approver,
        "attack": "important_instructions" if config.mode == "attack" else None,
        "suites": {name: _figures(rs) for name, rs in by_suite.items()},
        "overall": _figures(results),
        "published": {k: dict(v) for k, v in PUBLISHED.items()},
        "seconds": round(seconds, 2),
    }
