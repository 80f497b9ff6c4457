"""The ``actionspace`` command line: demo, trace, bench, eval."""

from __future__ import annotations

import io
import json
import sqlite3
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from rich.console import Console

from actionspace._cli_app import CliApp

if TYPE_CHECKING:
    from actionspace.demo.runner import ScenarioOutcome

__all__ = ["app", "main"]

app = CliApp(
    name="actionspace",
    help="A runtime between an LLM and the tools it calls: checked proposals, exactly-once effects, "
    "typed observations, and a trace of every decision.",
    no_args_is_help=True,
    add_completion=False,
    epilog="Example: actionspace demo, then actionspace trace list (and actionspace COMMAND --help)",
)


def _show_version(value: bool) -> None:
    if value:
        from actionspace._version import package_version

        typer.echo(f"actionspace {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """A runtime between an LLM and the tools it calls: checked proposals, exactly-once effects,
    typed observations, and a trace of every decision."""


_mounted = False


def _mount() -> None:
    """Attach the sub-commands that live in their own modules (once)."""
    global _mounted
    if _mounted:
        return
    _mounted = True
    from actionspace.trace.cli import trace_app

    app.add_typer(
        trace_app,
        name="trace",
        help="Read traces: list runs, show a run's timeline, export JSONL.",
        epilog="Example: actionspace trace list, then actionspace trace show RUN_ID",
    )
    from actionspace._cli_ledger import approvals_app, ledger_app

    app.add_typer(ledger_app, name="ledger", epilog="Example: actionspace ledger list --state unknown_commit")
    app.add_typer(approvals_app, name="approvals", epilog="Example: actionspace approvals list --status all")
    from actionspace.evaluation.monitor_cli import monitor_command

    app.command(
        "monitor",
        help="Per-tool health of a trace store: selection, rejects, failures, unknown commits, result use.",
        epilog="Example: actionspace monitor --since 1d --json",
    )(monitor_command)
    from actionspace._cli_plan import plan_app

    app.add_typer(plan_app, name="plan", epilog="Example: actionspace plan check plan.json")
    from actionspace.service.cli import serve_command

    app.command(
        "serve",
        help="Serve the JSON API and the web console (approvals, runs, traces).",
        epilog="Example: actionspace serve --port 8765 (after actionspace demo: approve its held call)",
    )(serve_command)
    from actionspace.adapters._gateway_cli import gateway_command

    app.command(
        "gateway",
        help="Serve the configured tools over MCP (stdio or streamable HTTP), governed.",
        epilog="Example: actionspace gateway --config gateway.toml --transport http --port 8766",
    )(gateway_command)
    try:
        from actionspace.durable.worker import worker_command
    except ImportError:  # dbos is not installed
        pass
    else:
        app.command(
            "worker",
            help="Run durable plans (the dbos backend) from a shared PostgreSQL store.",
            epilog="Example: actionspace worker --store postgresql://app@db/actionspace "
            "--tools myapp.tools:register",
        )(worker_command)
    try:
        from actionspace.bench.cli import bench_command
    except ImportError:  # the bench module is optional at import time
        return
    app.command(
        "bench",
        help="Per-call overhead of actionspace vs peer frameworks and physical floors.",
        epilog="Example: actionspace bench --quick --only actionspace --only direct",
    )(bench_command)


@app.command()
def demo(
    json_out: Annotated[bool, typer.Option("--json", help="Print a machine-readable report.")] = False,
    folder: Annotated[
        Path | None,
        typer.Option("--dir", help="Folder for the scenarios' services (default: a new temp folder)."),
    ] = None,
    store: Annotated[
        str | None, typer.Option(help="Trace store URL (default: ACTIONSPACE_STORE or ~/.actionspace).")
    ] = None,
    today: Annotated[
        str | None, typer.Option(help="Pretend today is this ISO date (the scenario books 'next Tuesday').")
    ] = None,
    scenario: Annotated[
        int | None,
        typer.Option(
            "--scenario", min=1, max=4, help="Run only this scenario (1-4; default: all, in order)."
        ),
    ] = None,
) -> None:
    """The built-in scenarios against real local services, in order (exit 1 if any verdict fails).

    1 calendar: a scripted model's realistic mistakes, each a typed error with its recovery.
    2 vendors: parallel checks (one times out), a conditional save, a conflict, re-read and merge.
    3 migration: a directory of config files migrated as a DAG.
    4 revenue: parallel searches, a follow-up read of the official report, a verifier.

    Example: actionspace demo --scenario 2 --json
    """
    import sys

    from rich.rule import Rule

    from actionspace._cli_tables import on_interrupt, shown_store
    from actionspace.demo.runner import SCENARIOS, run_scenarios
    from actionspace.trace.store import default_store_url

    day = _iso_date(today)
    where = folder or Path(tempfile.mkdtemp(prefix="actionspace-demo-"))
    url = store or default_store_url()
    _ready(where, url)
    on_interrupt(f"the runs recorded so far stay in {shown_store(url)}, the scenarios' files in {where}")
    numbers = [scenario] if scenario is not None else sorted(SCENARIOS)
    outcomes = run_scenarios(numbers, where, store=url, today=day)
    for outcome in outcomes:
        if outcome.traceback:
            sys.stderr.write(outcome.traceback)
    ran = [o for o in outcomes if not o.skipped or scenario is not None]
    passed = bool(ran) and all(o.passed for o in ran)
    if json_out:
        report = {"passed": passed, "scenarios": [o.to_dict() for o in outcomes]}
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        console = Console()
        for outcome in outcomes:
            console.print(Rule(f"scenario {outcome.number}: {outcome.title}"))
            console.print(outcome.renderable())
        if len(outcomes) > 1:
            verdicts = ", ".join(f"{o.number} {_verdict_word(o)}" for o in outcomes)
            console.print(Rule(f"scenarios: {verdicts}", style="green" if passed else "red"))
    if not passed:
        raise typer.Exit(1)


def _iso_date(text: str | None) -> date | None:
    """``--today`` as a date; a usage error (exit 2) when it is not an ISO date."""
    if text is None:
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        message = f"takes an ISO date such as 2026-03-02, got {text!r}"
        raise typer.BadParameter(message, param_hint="--today") from None


def _ready(folder: Path, url: str) -> None:
    """The scenarios' folder made and the trace store opened, or one line and exit 1."""
    from actionspace._cli_tables import shown_store
    from actionspace.errors import ConfigurationError, store_unavailable
    from actionspace.trace.store import open_trace_store

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _fail(f"cannot make the folder {folder}: {_os_said(exc)}")
    try:
        open_trace_store(url).close()
    except ConfigurationError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"cannot open store {shown_store(url)}: {_os_said(exc)}")
    except sqlite3.DatabaseError as exc:
        from actionspace._cli_ledger import never_opens

        if (why := never_opens(url, exc)) is not None:
            _fail(why)
        if store_unavailable(exc):  # locked or busy: main() says so, and that it may be asked again
            raise
        _fail(f"cannot read store {shown_store(url)}: {exc}")


def _os_said(exc: OSError) -> str:
    """What the system said, and about which path (the one in the way may be a parent)."""
    return f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)


def _fail(message: str) -> NoReturn:
    from actionspace._cli_tables import fail

    fail(message)


def _verdict_word(outcome: ScenarioOutcome) -> str:
    return "skipped" if outcome.skipped else "passed" if outcome.passed else "FAILED"


eval_app = CliApp(
    help="Evaluate policies and tool interfaces: suites (BFCL, the demo, your own), layer by layer.",
    epilog="Example: actionspace eval suite demo --policy replay:ground-truth",
    no_args_is_help=True,
)
app.add_typer(eval_app, name="eval")


def _mount_eval() -> None:
    from actionspace.evaluation.bfcl_multiturn_cli import eval_bfcl_multiturn
    from actionspace.evaluation.eval_cli import eval_suite_command

    eval_app.command(
        "suite",
        help="A policy over a suite through the real runtime: p_parse … p_task, intervals, an HTML report.",
        epilog="Example: actionspace eval suite demo --policy replay:ground-truth --out report/",
    )(eval_suite_command)

    eval_app.command(
        "bfcl-multiturn",
        help="Replay BFCL's 800 multi-turn ground truths as plans and check the backends' state.",
        epilog="Example: actionspace eval bfcl-multiturn --limit 20 --json",
    )(eval_bfcl_multiturn)

    from actionspace.evaluation.agentdojo_cli import eval_agentdojo_command

    eval_app.command(
        "agentdojo",
        help="AgentDojo's 97 user tasks and its injection pairs through the runtime: utility, "
        "utility under attack, targeted ASR.",
        epilog="Example: actionspace eval agentdojo --mode attack --approver deny --json",
    )(eval_agentdojo_command)

    from actionspace.evaluation.parse_corpus import eval_parse_command

    eval_app.command(
        "parse",
        help="Raw open-model outputs (cited corpus): exact % and guessed calls by family.",
        epilog="Example: actionspace eval parse",
    )(eval_parse_command)


_mount_eval()


@eval_app.command("bfcl")
def eval_bfcl(
    json_out: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    stage: Annotated[
        str, typer.Option(help="'runtime' (full pipeline) or 'validator' (the validate stage alone, faster).")
    ] = "runtime",
    policy: Annotated[
        str | None,
        typer.Option(
            help="Evaluate a policy layer by layer instead (replay:ground-truth, replay:FILE.jsonl, "
            "scripted:FILE.json, openai:BASE_URL#MODEL); see 'actionspace eval suite --help'."
        ),
    ] = None,
    mutate: Annotated[
        str | None,
        typer.Option(
            help="With --policy replay:ground-truth: one fault per task (wrong_tool, dropped_call, "
            "extra_call, drop_required, wrong_type, out_of_enum, unknown_argument)."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="With --policy: write metrics.json and report.html here.")
    ] = None,
) -> None:
    """BFCL's function docs as tools: ground truths checked, five mutations each get the exact error.

    BFCL (bfcl-eval 2026.3.23, Apache-2.0) read as data: every function doc loaded as a tool, the
    ground-truth calls checked by the validator, and five mutations of each checked for the exact error.

    With --policy, the policy is evaluated on all 4,696 BFCL records instead (single-turn, agentic
    and multi-turn: p_parse … p_task, per category, disagreements with BFCL's own checker), split
    over the CPUs — the same as 'actionspace eval suite bfcl'. The pinned wheel is fetched once with
    `pip download --no-deps` into ~/.cache/actionspace/bfcl.

    Example: actionspace eval bfcl --policy replay:ground-truth --mutate wrong_type --out report/
    """
    if policy is not None or mutate is not None:
        if stage != "runtime":
            raise typer.BadParameter(
                "applies to the checks alone (without --policy and --mutate)", param_hint="--stage"
            )
        from actionspace.evaluation.eval_cli import eval_suite_command

        eval_suite_command(
            "bfcl",
            policy=policy or "replay:ground-truth",
            out=out,
            mutate=mutate,
            json_out=json_out,
            ablation=None,
        )
        return
    from actionspace._cli_tables import fail
    from actionspace.errors import BfclDataError
    from actionspace.evaluation.bfcl import format_bfcl_report, run_bfcl_checks

    if stage not in ("runtime", "validator"):
        raise typer.BadParameter(f"{stage!r} is not one of runtime, validator", param_hint="--stage")
    if out is not None:
        raise typer.BadParameter("writes the report of a policy: give --policy too", param_hint="--out")
    try:
        report = run_bfcl_checks(stage=stage)  # type: ignore[arg-type]
    except BfclDataError as exc:
        fail(str(exc))
    typer.echo(json.dumps(report, indent=2) if json_out else format_bfcl_report(report))


from actionspace._cli_checks import bench_stores, sweep_command, timeouts_command  # noqa: E402

app.command("bench-stores")(bench_stores)
app.command("timeouts")(timeouts_command)
app.command("sweep")(sweep_command)


def main() -> None:
    for stream in (sys.stdout, sys.stderr):
        # a trace may hold text UTF-8 cannot encode (a file name os.fsdecode decoded, half of an
        # emoji a model sent): print it escaped (\\udce9) rather than fail the command
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    _mount()
    from actionspace._cli_tables import interrupted_line

    try:
        app()
    except SystemExit as exc:  # Typer ends a command stopped by Ctrl-C with exit 130 and no word
        if (line := interrupted_line(exc)) is None:
            raise
        print(line, file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:
        from actionspace.errors import store_unavailable

        if not store_unavailable(exc):
            raise
        # the database did not answer (locked past its busy timeout, a lost connection): one
        # line, as for any other refusal, not a traceback
        from actionspace._cli_tables import one_line

        print(one_line(f"the store did not answer ({type(exc).__name__}: {exc}); try again"), file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
