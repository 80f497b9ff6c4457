"""``actionspace eval agentdojo``, and the options of an AgentDojo run (suites, task-set version,
policies, modes), kept apart from :mod:`actionspace.evaluation.agentdojo` so that the command line
builds its commands without loading the runtime: the run is imported when the command runs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

if TYPE_CHECKING:
    from actionspace.evaluation._agentdojo_replay import PairResult
    from actionspace.evaluation.agentdojo import AgentDojoConfig

__all__ = [
    "DEFAULT_BENCHMARK_VERSION",
    "POLICIES",
    "SUITES",
    "Mode",
    "PolicyName",
    "check_options",
    "check_version",
    "eval_agentdojo_command",
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


def _failures(results: Iterable[PairResult]) -> list[dict[str, Any]]:
    """Results that a reader should look at: lost utility, a false block, or a successful attack."""
    return [
        r.to_dict()
        for r in results
        if (r.injection_task is None and not r.utility) or r.false_blocks or r.attack_success or r.errors
    ]


def check_options(*, mode: str, suites: Iterable[str], policy: str, approver: str) -> None:
    """Refuse (typer.BadParameter, exit 2) a mode, suite, policy or approver that names nothing,
    listing the choices, before agentdojo is imported or a task is run."""
    _choose("--mode", (mode,), ("benign", "attack"))
    _choose("--suite", suites, SUITES)
    _choose("--policy", (policy,), POLICIES)
    _choose("--approver", (approver,), ("task", "deny"))


def _choose(option: str, given: Iterable[str], allowed: tuple[str, ...]) -> None:
    unknown = [g for g in given if g not in allowed]
    if unknown:
        raise typer.BadParameter(
            f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(allowed)}", param_hint=option
        )


PINNED_AGENTDOJO = "agentdojo==0.1.35"
"""The release the tool labels and the default task set were written against (the eval extra)."""


def check_version(version: str, suites: Iterable[str] = SUITES) -> None:
    """Refuse (typer.BadParameter) a task-set version, or a suite of it, the installed agentdojo
    does not hold; raise ConfigurationError when agentdojo has no public ``get_suites`` to ask.

    Only agentdojo's public ``load_suites.get_suites`` is read (it answers an unknown version with
    no suites); agentdojo offers no public list of its versions, so the refusal names the default.
    """
    from agentdojo.task_suite import load_suites

    from actionspace.errors import ConfigurationError

    get_suites = getattr(load_suites, "get_suites", None)
    if not callable(get_suites):
        raise ConfigurationError(
            f"the installed agentdojo {_installed()} has no agentdojo.task_suite.load_suites.get_suites; "
            f"install the tested release: pip install '{PINNED_AGENTDOJO}'"
        )
    held = dict(get_suites(version) or {})
    if not held:
        raise typer.BadParameter(
            f"agentdojo {_installed()} holds no task set {version!r} "
            f"(the default is {DEFAULT_BENCHMARK_VERSION}, from {PINNED_AGENTDOJO})",
            param_hint="--benchmark-version",
        )
    missing = [name for name in suites if name not in held]
    if missing:
        raise typer.BadParameter(
            f"task set {version!r} of agentdojo {_installed()} has no suite {', '.join(map(repr, missing))}; "
            f"it holds {', '.join(sorted(held))}",
            param_hint="--suite",
        )


def _installed() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("agentdojo")
    except PackageNotFoundError:
        return "(version unknown)"


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
    asked, per suite and overall. An option that names nothing is a usage error (exit 2) before any
    work; a run that cannot start exits 1.
    """
    from rich.console import Console

    from actionspace._cli_tables import fail
    from actionspace.errors import ConfigurationError

    check_options(mode=mode, suites=suite or (), policy=policy, approver=approver)
    try:
        import agentdojo  # noqa: F401
    except ImportError:
        fail("agentdojo is not installed: pip install 'actionspace[eval]' (the eval extra)")
    try:
        check_version(benchmark_version, suite or SUITES)
    except ConfigurationError as exc:
        fail(str(exc))
    from actionspace.evaluation.agentdojo import AgentDojoConfig, run_agentdojo, summarize

    console = Console(stderr=True)
    config = AgentDojoConfig(
        mode=mode,  # type: ignore[arg-type]
        suites=tuple(suite) if suite else SUITES,
        benchmark_version=benchmark_version,
        policy=policy,  # type: ignore[arg-type]
        approver=approver,  # type: ignore[arg-type]
        user_tasks=user_tasks,
        injection_tasks=injection_tasks,
    )
    started = time.perf_counter()
    try:
        results = run_agentdojo(config) if json_out else _with_bar(config, console)
    except KeyError as exc:
        fail(f"cannot start: {exc.args[0] if exc.args else exc}")
    report = summarize(results, config, seconds=time.perf_counter() - started)
    if json_out:
        if details:
            report["failures"] = _failures(results)
        typer.echo(json.dumps(report, indent=2))
        return
    _table(report)


def _with_bar(config: AgentDojoConfig, console: Any) -> list[PairResult]:
    from actionspace.evaluation.eval_cli import counted_bar

    with counted_bar(console) as bar:
        job = bar.add_task(f"AgentDojo {config.mode}", total=None)

        def step(_: str, n: int) -> None:
            if bar.tasks[0].total is None:
                bar.update(job, total=n)
            else:
                bar.advance(job, n)

        from actionspace.evaluation.agentdojo import run_agentdojo

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
