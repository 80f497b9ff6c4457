"""``actionspace eval suite``: a policy over a suite, layer by layer, with a report a person can read."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from actionspace._loader import load_callable
from actionspace.errors import ActionspaceError
from actionspace.evaluation.outcomes import LAYERS, TaskOutcome

__all__ = ["check_names", "counted_bar", "eval_suite_command", "load_suite"]


def load_suite(spec: str) -> object:
    """``bfcl`` / ``bfcl:cat1,cat2`` / ``demo`` / ``support-desk`` / a suite JSON file."""
    from actionspace.evaluation.suite import bfcl_suite, demo_suite, load

    if spec == "demo":
        return demo_suite()
    if spec == "support-desk":
        from actionspace.evaluation.support_desk import support_desk_suite

        return support_desk_suite()
    if spec == "bfcl" or spec.startswith("bfcl:"):
        categories = [c for c in spec.partition(":")[2].split(",") if c] or None
        return bfcl_suite(categories)
    return load(spec)


def _refuse(console: Console, label: str, exc: BaseException) -> None:
    """One line on stderr, taken as text (a file name may hold brackets) and never wrapped."""
    from actionspace._cli_tables import REFUSAL_PREFIX, one_line

    said = Text(one_line(f"{label} {exc}"))
    said.stylize("red", 0, len(REFUSAL_PREFIX) + len(label))
    console.print(said, soft_wrap=True)


_POLICY_KINDS = ("replay", "scripted", "openai", "openai+stream", "example")
"""What ``--policy`` may start with (``example:flawed`` is support-desk's own)."""


def check_names(
    *, ablation: list[str] | None, mutate: str | None, policy: str, gate: str | None = None
) -> None:
    """Refuse (typer.BadParameter, exit 2) an ablation, mutation, policy kind or gate that names
    nothing, listing the choices, before a suite is loaded or a task is run."""
    from actionspace.evaluation.ablations import ABLATIONS
    from actionspace.evaluation.mutated import DROPS_AT
    from actionspace.evaluation.runner import COUNTERFACTUAL

    _choose("--ablation", ablation or (), (*ABLATIONS, COUNTERFACTUAL))
    _choose("--mutate", () if mutate is None else (mutate,), tuple(DROPS_AT))
    _choose("--policy", (policy.partition(":")[0],), _POLICY_KINDS)
    _choose("--gate", () if gate is None else (gate,), ("default", "calibrated"))


def _choose(option: str, given: Any, allowed: tuple[str, ...]) -> None:
    unknown = [g for g in given if g not in allowed]
    if unknown:
        raise typer.BadParameter(
            f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(allowed)}", param_hint=option
        )


def counted_bar(console: Console) -> Progress:
    """The progress bar of an evaluation: its task's name, the bar, done of total, time taken."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def eval_suite_command(
    suite: Annotated[
        str, typer.Argument(help="bfcl, bfcl:CATEGORY[,CATEGORY…], demo, or a suite JSON file.")
    ],
    policy: Annotated[
        str,
        typer.Option(
            help="replay:ground-truth, replay:FILE.jsonl, scripted:FILE.json or openai:BASE_URL#MODEL "
            "(vLLM, llama.cpp server, Ollama, hosted APIs)."
        ),
    ] = "replay:ground-truth",
    out: Annotated[
        Path | None, typer.Option(help="Write metrics.json, outcomes.jsonl and report.html here.")
    ] = None,
    ablation: Annotated[
        list[str] | None,
        typer.Option(
            help="Also run with one interface factor changed (repeatable): names_hidden, "
            "descriptions_perturbed, enums_dropped, candidates_widened, feedback_bare, counterfactual."
        ),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N runnable tasks.")] = None,
    mutate: Annotated[
        str | None,
        typer.Option(
            help="With replay:ground-truth: one fault per task (wrong_tool, dropped_call, extra_call, "
            "drop_required, wrong_type, out_of_enum, unknown_argument); the report says where each dropped."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the ablations.")] = 0,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Processes to play the tasks in (default: the CPUs available); used for policies whose "
            "answers depend on the task alone (replay, scripted files, the ground truth).",
        ),
    ] = None,
    reference: Annotated[
        bool,
        typer.Option(
            help="For BFCL single-turn tasks, also run BFCL's own AST checker (imported from the pinned "
            "wheel) on the same outputs and list every disagreement."
        ),
    ] = True,
    json_out: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
    tools: Annotated[
        str | None,
        typer.Option(
            help="module:function, a runtime factory (the reset hook: called once per task, returns an "
            "actionspace.evaluation.runner.Environment); every task is then played turn by turn on your "
            "real tools. support-desk brings its own; demo has actionspace.evaluation._suite_demo:"
            "demo_environment."
        ),
    ] = None,
    gate: Annotated[
        str | None,
        typer.Option(
            help="With a runtime factory: also run with a confidence gate and compare. 'default' (read 0.5, "
            "write 0.8, external 0.95) or 'calibrated' (thresholds read off the ungated run's outcomes)."
        ),
    ] = None,
) -> None:
    """Run POLICY on SUITE through the real runtime; report p_parse … p_task with 95 % intervals.

    Each task runs in a fresh in-memory runtime (with --tools: a fresh environment from your
    factory, traces kept in OUT/ungated/trace.db, and OUT/gated/trace.db with --gate, OUT being a
    temporary folder without --out); its run id in the outcomes points at the trace that holds every
    decision. Exit 1 when the suite, the policy or OUT cannot be loaded or made, or OUT holds the
    traces of an earlier evaluation on a runtime factory; exit 2 for options the run would ignore
    (--gate without --tools, --ablation with it).
    """
    from actionspace.evaluation._parallel_eval import default_workers
    from actionspace.evaluation.calibration import ThresholdPolicy, evaluate_thresholds
    from actionspace.evaluation.metrics import public_metrics, summarize
    from actionspace.evaluation.mutated import MutatedPolicy, mutation_summary
    from actionspace.evaluation.policies import Policy, policy_from_spec
    from actionspace.evaluation.runner import evaluate, ground_truth_policy, runnable
    from actionspace.evaluation.suite import Suite

    check_names(ablation=ablation, mutate=mutate, policy=policy, gate=gate)
    console = Console(stderr=True)
    try:
        loaded = load_suite(suite)
        assert isinstance(loaded, Suite)
        if mutate is not None:
            if policy != "replay:ground-truth":
                raise ActionspaceError(
                    "--mutate mutates the ground truth: use it with --policy replay:ground-truth"
                )
            chosen: Policy = MutatedPolicy(loaded, mutate)
        elif policy == "replay:ground-truth":
            chosen = ground_truth_policy(loaded)
        elif policy == "example:flawed" and suite == "support-desk":
            from actionspace.evaluation.support_desk import flawed_policy

            chosen = flawed_policy(loaded)
        else:
            chosen = policy_from_spec(policy)
        factory = _factory(tools, suite)
        _check_options(factory, gate=gate, ablation=ablation)
        played = [t for t in loaded.tasks if factory is not None or runnable(t)][:limit]
        unanswered = _unanswered(policy if mutate is None else "", played)
        if out is not None:  # refused now rather than after the whole run
            _no_earlier_traces(out, factory)
            out.mkdir(parents=True, exist_ok=True)
    except (ActionspaceError, OSError, ValueError) as exc:
        _refuse(console, "cannot start:", exc)
        raise typer.Exit(1) from exc
    if unanswered:
        _warn(
            console,
            f"{_count(unanswered, played)} have no output in {policy.partition(':')[2]}: "
            f"scored as if the model proposed nothing ({_ids(unanswered)})",
        )
    from actionspace._cli_tables import on_interrupt

    on_interrupt(f"no report was written{'' if out is None else f' to {out}'}")
    if factory is not None:
        _eval_env(loaded, chosen, factory, policy=policy, out=out, gate=gate, limit=limit, json_out=json_out)
        return
    variants = ("baseline", *(ablation or ()))
    skipped = sum(1 for t in loaded.tasks if not runnable(t))
    if skipped:
        console.print(
            f"[yellow]{skipped} of {len(loaded.tasks)} tasks skipped:[/yellow] tasks with several turns "
            "or backend state are only run for BFCL multi-turn and the demo's calendar"
        )
    total = min(sum(1 for t in loaded.tasks if runnable(t)), limit or 10**9) * len(variants)
    outcomes: list[TaskOutcome] = []
    with counted_bar(console) as bar:
        job = bar.add_task(f"{loaded.name} × {policy}", total=total)
        try:
            outcomes = evaluate(
                loaded,
                chosen,
                variants=variants,
                seed=seed,
                limit=limit,
                progress=lambda _: bar.advance(job),
                workers=workers or default_workers(),
            )
        except ActionspaceError as exc:
            _refuse(console, "evaluation stopped:", exc)
            raise typer.Exit(1) from exc
    metrics = summarize(
        outcomes, suite=loaded.name, policy=policy if mutate is None else f"{policy}+{mutate}"
    )
    if reference and any(t.origin.startswith("bfcl:") for t in loaded.tasks):
        from actionspace.evaluation._bfcl_compare import bfcl_reference
        from actionspace.evaluation._bfcl_leaderboard import bfcl_leaderboard

        compared = bfcl_reference(loaded, outcomes, workers=workers or default_workers())
        metrics["disagreements"] = compared["disagreements"]
        metrics["reference_checker"] = compared["summary"]
        metrics["bfcl_leaderboard"] = bfcl_leaderboard(loaded, outcomes, compared["verdicts"])
    if isinstance(chosen, MutatedPolicy):
        metrics["mutation"] = mutation_summary(chosen, outcomes)
    if any(step.confidence is not None for o in outcomes for step in o.steps):
        thresholds = ThresholdPolicy()
        effects = {
            str(t["name"]): str(t["effect"]) for task in loaded.tasks for t in task.tools if "effect" in t
        }
        report = evaluate_thresholds(outcomes, thresholds, effects=effects).to_dict()
        metrics["thresholds"] = {**report, "policy": thresholds.to_dict()}
    if out is not None:
        from actionspace.evaluation.report import write_report

        page = write_report(metrics, out, outcomes=outcomes)
        console.print(f"report: {page}")
    if json_out:
        typer.echo(json.dumps(public_metrics(metrics), indent=2, default=str))
        return
    _print_layers(metrics, loaded.name, policy)
    if "bfcl_leaderboard" in metrics:
        _print_bfcl(metrics["bfcl_leaderboard"])


def _unanswered(policy: str, played: list[Any]) -> list[str]:
    """The ids of ``played`` a ``replay:``/``scripted:`` file holds no output for (none for another
    policy); ActionspaceError when it holds none for any of them, which would score every task as
    if the model proposed nothing. The file was read and checked by the policy already."""
    kind, _, path = policy.partition(":")
    if kind not in ("replay", "scripted") or path == "ground-truth" or not played:
        return []
    text = Path(path).read_text(encoding="utf-8")
    if kind == "scripted":
        held = {str(task_id) for task_id, turns in json.loads(text).items() if turns}
    else:
        held = {str(json.loads(line)["task_id"]) for line in text.splitlines() if line.strip()}
    missing = [t.id for t in played if t.id not in held]
    if not held:
        raise ActionspaceError(f"{path} holds no output for any task: every task would score as no call")
    if len(missing) == len(played):
        raise ActionspaceError(
            f"{path} holds outputs for none of the {len(played)} tasks to play "
            f"(it answers {_ids(sorted(held))}; the suite asks {_ids(missing)}): was it recorded "
            "for another suite?"
        )
    return missing


def _count(some: list[str], played: list[Any]) -> str:
    return f"{len(some)} of the {len(played)} tasks"


def _ids(ids: list[str], shown: int = 5) -> str:
    """The first ``shown`` ids, then how many more."""
    more = f", … {len(ids) - shown} more" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _warn(console: Console, message: str) -> None:
    """One line on stderr, taken as text and never wrapped."""
    from actionspace._cli_tables import printable

    said = Text("warning: " + printable(" ".join(message.split())))
    said.stylize("yellow", 0, len("warning:"))
    console.print(said, soft_wrap=True)


def _factory(tools: str | None, suite: str) -> Any:
    """The runtime factory named by ``--tools`` (support-desk's own when not given), or None."""
    if tools is None and suite == "support-desk":
        tools = "actionspace.evaluation.support_desk:support_desk_environment"
    if tools is None:
        return None
    return load_callable(tools, option="--tools")


def _no_earlier_traces(out: Path, factory: Any) -> None:
    """Refuse an ``--out`` whose traces an evaluation on a runtime factory would continue.

    Its run ids are the tasks' own: a second evaluation into the same folder would append its turns
    to the earlier runs (and share their ledger), mixing two evaluations in every trace.
    """
    held = [out / kind / "trace.db" for kind in ("ungated", "gated")]
    earlier = [str(p) for p in held if factory is not None and p.exists()]
    if earlier:
        raise ActionspaceError(
            f"{out} holds the traces of an earlier evaluation ({', '.join(earlier)}); "
            "give another --out or remove that folder"
        )


def _check_options(factory: Any, *, gate: str | None, ablation: list[str] | None) -> None:
    """Refuse the options a run of this kind would silently ignore."""
    if gate is not None and factory is None:
        raise typer.BadParameter(
            "gates calls played on your tools: give a runtime factory with --tools", param_hint="--gate"
        )
    if ablation and factory is not None:
        raise typer.BadParameter(
            "tasks played on a runtime factory run the baseline only; drop --ablation or --tools",
            param_hint="--ablation",
        )


def _eval_env(
    loaded: Any,
    chosen: Any,
    factory: Any,
    *,
    policy: str,
    out: Path | None,
    gate: str | None,
    limit: int | None,
    json_out: bool,
) -> None:
    """Every task on the user's tools (and, with ``gate``, once more gated); print or write the report."""
    from actionspace._cli_tables import on_interrupt
    from actionspace.evaluation.calibration import ThresholdPolicy, evaluate_thresholds
    from actionspace.evaluation.gating import compare_gating
    from actionspace.evaluation.metrics import public_metrics, summarize
    from actionspace.evaluation.runner import evaluate

    folder = out or Path(tempfile.mkdtemp(prefix="actionspace-eval-"))
    on_interrupt(f"no report was written; the traces of the tasks played so far stay in {folder}")
    outcomes = evaluate(loaded, chosen, runtime_factory=factory, trace_dir=folder / "ungated", limit=limit)
    metrics = summarize(outcomes, suite=loaded.name, policy=policy)
    metrics["traces"] = str(folder / "ungated" / "trace.db")
    effects = {str(t["name"]): str(t["effect"]) for task in loaded.tasks for t in task.tools if "effect" in t}
    risks = {str(t["name"]): str(t["risk"]) for task in loaded.tasks for t in task.tools if "risk" in t}
    if any(step.confidence is not None for o in outcomes for step in o.steps):
        thresholds = ThresholdPolicy()
        report = evaluate_thresholds(outcomes, thresholds, effects=effects, risks=risks).to_dict()
        metrics["thresholds"] = {**report, "policy": thresholds.to_dict()}
    if gate is not None:
        chosen_gate = (
            ThresholdPolicy.from_calibration(outcomes, effects=effects)
            if gate == "calibrated"
            else ThresholdPolicy()
        )
        gated = evaluate(
            loaded, chosen, runtime_factory=factory, trace_dir=folder / "gated", limit=limit, gate=chosen_gate
        )
        metrics["gating"] = {
            **compare_gating(outcomes, gated, policy=chosen_gate.to_dict()),
            "traces": str(folder / "gated" / "trace.db"),
        }
    if out is not None:
        from actionspace.evaluation.report import write_report

        Console(stderr=True).print(f"report: {write_report(metrics, out, outcomes=outcomes)}")
    if json_out:
        typer.echo(json.dumps(public_metrics(metrics), indent=2, default=str))
        return
    _print_layers(metrics, loaded.name, policy)
    incidents = metrics["incidents"]
    Console().print(f"incidents: {incidents['total']} {incidents['by_kind']}; traces: {metrics['traces']}")
    if "gating" in metrics:
        g = metrics["gating"]
        Console().print(
            f"gated ({g['policy']}): p_task {_pct(g['gated']['p_task'])} vs {_pct(g['ungated']['p_task'])}, "
            f"incidents {g['gated']['incidents']} vs {g['ungated']['incidents']}, wrong writes avoided "
            f"{g['wrong_writes_avoided']}, questions asked {g['questions_asked']}, looked further "
            f"{g['looked_further']}, right calls held {g['right_calls_held']}"
        )


def _print_layers(metrics: Any, name: str, policy: str) -> None:
    table = Table(title=f"{name}: {metrics['n_tasks']} tasks, policy {policy}")
    for column in ("layer", "conditional", "cumulative", "95 % interval"):
        table.add_column(column)
    for layer in LAYERS:
        row = metrics["layers"][layer]
        cond, cum = row["conditional"], row["cumulative"]
        table.add_row(
            f"p_{layer}",
            _pct(cond["rate"]) + f" ({cond['passed']}/{cond['n']})",
            _pct(cum["rate"]),
            f"{_pct(cum['low'])} – {_pct(cum['high'])}",
        )
    Console().print(table)


def _print_bfcl(board: Any) -> None:
    """BFCL's categories and overall figure, ours beside BFCL's checker's."""
    table = Table(title=f"BFCL {board['version']} categories: ours vs BFCL's checker")
    for column in ("category", "n", "ours", "BFCL"):
        table.add_column(column)
    for name, row in board["categories"].items():
        table.add_row(name, str(row["n"]), _pct(row["ours"]), _pct(row["bfcl"]))
    for group in ("non_live", "live", "irrelevance", "multi_turn", "agentic", "overall"):
        table.add_row(f"[bold]{group}[/bold]", "", _pct(board["ours"][group]), _pct(board["bfcl"][group]))
    Console().print(table)
    missing = ", ".join(board["not_evaluated"]) or "none"
    Console().print(
        f"overall by BFCL's formula (not evaluated = 0: {missing}); over the evaluated categories only: "
        f"ours {_pct(board['ours_evaluated']['overall'])}, BFCL {_pct(board['bfcl_evaluated']['overall'])}"
    )


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"
