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

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer

from actionspace.evaluation._agentdojo_policies import argument_policy, field_trust
from actionspace.evaluation._agentdojo_replay import Approver, PairResult, SimulatedUser, SuiteReplay
from actionspace.evaluation._agentdojo_tools import TOOL_LABELS
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

SUITES: tuple[str, ...] = ("workspace", "travel", "banking", "slack")
DEFAULT_BENCHMARK_VERSION = "v1.2.2"
"""The newest task set in agentdojo 0.1.35 (97 user tasks, 26 injection tasks with a ground truth)."""

PolicyName = Literal["provenance", "strict", "default", "none"]
POLICIES: tuple[PolicyName, ...] = ("provenance", "strict", "default", "none")
"""``provenance``: ``NoSecretToExternalSink()`` and the operator's per-argument provenance rules
(:mod:`actionspace.evaluation._agentdojo_policies`); ``strict``: the default flow policy and
``UntrustedWrites(on="ask")``; ``default``: the runtime's ``DEFAULT_FLOW_POLICY``; ``none``: no
flow policy (the undefended baseline)."""

Mode = Literal["benign", "attack"]

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


def _failures(results: Iterable[PairResult]) -> list[dict[str, Any]]:
    """Results that a reader should look at: lost utility, a false block, or a successful attack."""
    return [
        r.to_dict()
        for r in results
        if (r.injection_task is None and not r.utility) or r.false_blocks or r.attack_success or r.errors
    ]


def eval_agentdojo_command(
    mode: Annotated[
        str, typer.Option(help="benign (the 97 user tasks) or attack (plus every pair).")
    ] = "benign",
    suite: Annotated[
        list[str] | None, typer.Option(help="Suite (repeatable): workspace, travel, banking, slack.")
    ] = None,
    policy: Annotated[
        str,
        typer.Option(
            help="provenance (per-argument rules), strict (default & UntrustedWrites), default, "
            "or none (undefended)."
        ),
    ] = "provenance",
    approver: Annotated[
        str, typer.Option(help="task: the simulated user approves its own task's calls; deny: refuses all.")
    ] = "task",
    benchmark_version: Annotated[str, typer.Option(help="AgentDojo task-set version.")] = (
        DEFAULT_BENCHMARK_VERSION
    ),
    user_tasks: Annotated[
        int | None, typer.Option(min=1, help="Only the first N user tasks per suite.")
    ] = None,
    injection_tasks: Annotated[
        int | None, typer.Option(min=1, help="Only the first N injection tasks per suite.")
    ] = None,
    details: Annotated[bool, typer.Option(help="With --json: also list every failing task or pair.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
) -> None:
    """AgentDojo's ground truths through the runtime, scored by AgentDojo's own checks.

    Prints utility, utility under attack, targeted attack success rate, false blocks and approvals
    asked, per suite and overall. Exit 1 on a bad option.
    """
    from rich.console import Console

    console = Console(stderr=True)
    if mode not in ("benign", "attack") or policy not in POLICIES or approver not in ("task", "deny"):
        console.print(f"[red]bad option:[/red] mode={mode!r} policy={policy!r} approver={approver!r}")
        raise typer.Exit(1)
    try:
        import agentdojo  # noqa: F401
    except ImportError as exc:
        console.print("[red]agentdojo is not installed:[/red] pip install 'agentdojo==0.1.35' (dev extra)")
        raise typer.Exit(1) from exc
    config = AgentDojoConfig(
        mode=mode,  # type: ignore[arg-type]
        suites=tuple(suite) if suite else SUITES,
        benchmark_version=benchmark_version,
        policy=policy,
        approver=approver,  # type: ignore[arg-type]
        user_tasks=user_tasks,
        injection_tasks=injection_tasks,
    )
    started = time.perf_counter()
    try:
        results = run_agentdojo(config) if json_out else _with_bar(config, console)
    except KeyError as exc:
        console.print(f"[red]cannot start:[/red] {exc}")
        raise typer.Exit(1) from exc
    report = summarize(results, config, seconds=time.perf_counter() - started)
    if json_out:
        if details:
            report["failures"] = _failures(results)
        typer.echo(json.dumps(report, indent=2))
        return
    _table(report)


def _with_bar(config: AgentDojoConfig, console: Any) -> list[PairResult]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        job = bar.add_task(f"AgentDojo {config.mode}", total=None)

        def step(_: str, n: int) -> None:
            if bar.tasks[0].total is None:
                bar.update(job, total=n)
            else:
                bar.advance(job, n)

        return run_agentdojo(config, progress=step)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def _table(report: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"{report['benchmark']} · {report['mode']} · policy {report['policy']} · "
        f"approver {report['approver']} · {report['seconds']} s"
    )
    for column in ("suite", "utility", "utility under attack", "targeted ASR", "false blocks", "approvals"):
        table.add_column(column)
    rows = [*report["suites"].items(), ("overall", report["overall"])]
    for name, f in rows:
        table.add_row(
            name,
            f"{_pct(f['utility'])} ({f['tasks_solved']}/{f['tasks']})",
            _pct(f["utility_under_attack"]),
            f"{_pct(f['attack_success_rate'])} ({f['attacks_succeeded']}/{f['pairs']})",
            str(f["false_blocks"]),
            str(f["approvals_asked"]),
        )
    Console().print(table)
    Console().print(
        "published: CaMeL 77 % utility with provable security (84 % undefended); "
        "Progent ASR 41.2 % → 2.2 % (sources: docs/agentdojo.md)"
    )
