"""The durable crash sweep: worker processes SIGKILLed at random moments while they run many plans.

``python -m actionspace.durable.sweep --plans 200 --kills 20`` starts a throwaway PostgreSQL
cluster (or uses ``--store``), three ``actionspace worker`` processes with the sweep tools
(:mod:`actionspace.durable.sweep_tools`), submits plans of 5–20 nodes of the three idempotency
kinds, and kills a worker with SIGKILL ``--kills`` times (restarting it each time, under a new
executor id) while they run: the worker that began the most node attempts in the last two seconds,
so that its plans in flight must be taken over by another (a random one when none began any).
Then it checks, at the tools' own table:

* every plan completed (its workflow returned a result);
* duplicates: actions whose effect is stored more than once — must be 0;
* lost: nodes reported ok whose effect is not stored, or native/query nodes that did not end ok
  for any reason but a blocked ancestor — must be 0;
* every lost response of a ``none`` tool (and every ``none`` node cut short) ends ``unknown_commit``;
  a node blocked by such an ancestor never ran.

Exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from actionspace.durable.backend import PlanClient
from actionspace.durable.config import DurableConfig
from actionspace.durable.executors import live_executors
from actionspace.durable.sweep_tools import KINDS, TOOLS, prepare
from actionspace.plan.model import PlanResult

__all__ = ["SweepReport", "Workers", "make_plan", "run_sweep", "verify"]

WORKER_START_S = 90.0
"""Longest wait (seconds) for the workers to start beating."""


def make_plan(run_id: str, rng: random.Random, *, min_nodes: int = 5, max_nodes: int = 20) -> dict[str, Any]:
    """A random plan: each node one of the three kinds; about half take an earlier node's value."""
    nodes: list[dict[str, Any]] = []
    for i in range(rng.randint(min_nodes, max_nodes)):
        kind = rng.choices(KINDS, weights=(0.4, 0.4, 0.2))[0]
        value: Any = rng.randint(0, 1000)
        if i and rng.random() < 0.5:
            value = {"$ref": f"n{rng.randrange(i)}.data.value"}
        nodes.append(
            {"id": f"n{i}", "tool": TOOLS[kind], "arguments": {"ref": f"{run_id}/n{i}", "value": value}}
        )
    return {"nodes": nodes}


@dataclass(slots=True)
class SweepReport:
    """What the sweep found; ``ok`` when every check held."""

    plans: int
    nodes: int = 0
    completed: int = 0
    kills: int = 0
    duplicates: int = 0
    lost: int = 0
    unknown_commit: int = 0
    injected_none_faults: int = 0
    unreported_ambiguities: int = 0
    blocked: int = 0
    ran_while_blocked: int = 0
    unexpected: list[str] = field(default_factory=list)
    duplicate_refs: list[str] = field(default_factory=list)
    takeovers: int = 0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return (
            self.completed == self.plans
            and self.duplicates == 0
            and self.lost == 0
            and self.unreported_ambiguities == 0
            and self.ran_while_blocked == 0
            and not self.unexpected
        )

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["unexpected"] = self.unexpected[:20]
        out["duplicate_refs"] = self.duplicate_refs[:20]
        out["ok"] = self.ok
        return out


def verify(
    url: str, plans: dict[str, dict[str, Any]], results: dict[str, PlanResult], report: SweepReport
) -> None:
    """Check every node's observation against the effects stored at the tools' own table."""
    with psycopg.connect(url) as conn:
        counts = {
            (kind, ref): n
            for kind, ref, n in conn.execute("SELECT kind, ref, count(*) FROM sweep_effects GROUP BY 1, 2")
        }
        faults = {ref for (ref,) in conn.execute("SELECT ref FROM sweep_faults WHERE kind = 'none'")}
    kind_of = {tool: kind for kind, tool in TOOLS.items()}
    report.duplicate_refs = sorted(f"{kind}:{ref}" for (kind, ref), n in counts.items() if n > 1)
    report.duplicates = len(report.duplicate_refs)
    report.injected_none_faults = len(faults)
    for run_id, plan in plans.items():
        result = results.get(run_id)
        if result is None:
            continue
        for node in plan["nodes"]:
            report.nodes += 1
            ref, kind = node["arguments"]["ref"], kind_of[node["tool"]]
            stored = counts.get((kind, ref), 0)
            obs = result.nodes.get(node["id"])
            category = obs.error.category if obs is not None and obs.error is not None else None
            if obs is None:
                report.unexpected.append(f"{ref}: no observation")
            elif obs.status == "ok":
                report.lost += stored == 0
                if ref in faults:
                    report.unreported_ambiguities += 1
            elif category == "unknown_commit":
                report.unknown_commit += 1
                if kind != "none":
                    report.unexpected.append(f"{ref}: unknown_commit from a {kind} tool")
            elif category == "cancelled" and "blocked_by" in obs.error.details:  # type: ignore[union-attr]
                report.blocked += 1
                report.ran_while_blocked += stored > 0
            else:
                report.unexpected.append(f"{ref}: {category}: {obs.error.message if obs.error else ''}"[:300])
                report.lost += stored == 0 and kind != "none"


class Workers:
    """``count`` worker processes on ``url``; kill / restart them by index."""

    def __init__(
        self,
        url: str,
        count: int,
        *,
        schema: str,
        concurrency: int,
        dead_after_s: float,
        logs: Path,
        tools: str = "actionspace.durable.sweep_tools:register",
        extra: Sequence[str] = (),
    ) -> None:
        self.url, self.schema, self.concurrency, self.dead_after_s = url, schema, concurrency, dead_after_s
        self.logs, self.tools, self.extra = logs, tools, list(extra)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.ids: list[str] = []
        """The DBOS executor id of each process (a restarted one gets a new id)."""
        self.started = 0
        for _ in range(count):
            self.procs.append(self._spawn())
            self.ids.append(self._id())

    def _id(self) -> str:
        return f"{self.schema}-w{self.started}"

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.started += 1
        log = open(self.logs / f"worker-{self.started}.log", "wb")  # noqa: SIM115 — closed with the process
        command = [
            sys.executable, "-m", "actionspace.durable.worker",
            "--store", self.url,
            "--executor-id", self._id(),
            "--tools", self.tools,
            "--concurrency", str(self.concurrency),
            "--dead-after", str(self.dead_after_s),
            "--schema", self.schema,
            *self.extra,
        ]  # fmt: skip
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)

    def kill(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def restart(self, i: int) -> None:
        self.procs[i] = self._spawn()
        self.ids[i] = self._id()

    def kill_and_restart(self, i: int) -> None:
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()
        self.restart(i)

    def busiest(self, within_s: float = 2.0) -> int | None:
        """The index of the worker that began the most node attempts in the last ``within_s``
        seconds (it has plans in flight), or None when none began any or the database cannot be
        asked now (its connections all taken by the workers, say)."""
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT executor_id FROM actionspace_node_attempts"
                    " WHERE started_at >= %s AND executor_id = ANY(%s)"
                    " GROUP BY executor_id ORDER BY count(*) DESC LIMIT 1",
                    (time.time() - within_s, self.ids),
                ).fetchone()
        except psycopg.Error:
            return None
        return None if row is None else self.ids.index(row[0])

    def wait_live(self, n: int, deadline_s: float, *, exclude: Collection[str] = ()) -> set[str]:
        """Wait until ``n`` executors not in ``exclude`` beat; returns every live executor id."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            try:
                live = set(live_executors(self.url, within_s=self.dead_after_s))
                if len(live - set(exclude)) >= n:
                    return live
            except psycopg.Error:
                pass  # the heartbeat table does not exist yet
            dead = [p.returncode for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"a worker exited with {dead[0]}; see {self.logs}")
            time.sleep(0.2)
        raise RuntimeError(f"workers did not start within {deadline_s} s; see {self.logs}")

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_sweep(
    url: str,
    *,
    plans: int,
    kills: int,
    workers: int = 3,
    seed: int = 0,
    concurrency: int = 8,
    dead_after_s: float = 10.0,
    timeout_s: float = 1800.0,
    logs: Path | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> SweepReport:
    """Run the sweep on the database of ``url`` (see the module docstring)."""
    rng = random.Random(seed)
    schema = f"dbos_sweep_{uuid.uuid4().hex[:8]}"
    prepare(url)
    report = SweepReport(plans=plans)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="actionspace-sweep-") as tmp:
        where = logs or Path(tmp)
        pool = Workers(
            url, workers, schema=schema, concurrency=concurrency, dead_after_s=dead_after_s, logs=where
        )
        try:
            pool.wait_live(workers, WORKER_START_S)
            progress(f"{workers} workers up after {time.monotonic() - began:.1f} s")
            config = DurableConfig(system_schema=schema)
            plan_of = {f"sweep-{seed}-{i}": make_plan(f"sweep-{seed}-{i}", rng) for i in range(plans)}
            with PlanClient(url, config=config) as client:
                for run_id, plan in plan_of.items():
                    client.submit(plan, run_id=run_id)
                progress(f"{plans} plans submitted")
                done, seen = threading.Event(), _Progress()
                args = (pool, kills, rng, done, report, seen, plans, progress)
                killer = threading.Thread(target=_kill_loop, args=args, daemon=True)
                killer.start()
                try:
                    results = _collect(client, list(plan_of), timeout_s, seen)
                finally:
                    done.set()
                    killer.join()
            report.completed = len(results)
            report.takeovers = _takeovers(url)
            verify(url, plan_of, results, report)
        finally:
            pool.stop()
    report.wall_s = round(time.monotonic() - began, 2)
    return report


@dataclass(slots=True)
class _Progress:
    finished: int = 0


def _kill_loop(
    pool: Workers,
    kills: int,
    rng: random.Random,
    done: threading.Event,
    report: SweepReport,
    seen: _Progress,
    plans: int,
    progress: Callable[[str], None],
) -> None:
    """Kill at random moments spread over the run (after random shares, up to 85 %, of the plans
    ended) the worker with the most work in flight."""
    marks = sorted(rng.uniform(0.0, 0.85) * plans for _ in range(kills))
    for mark in marks:
        while seen.finished < mark:
            if done.wait(0.05):
                return
        if done.wait(rng.uniform(0.0, 0.5)):
            return
        busiest = pool.busiest()
        victim = busiest if busiest is not None else rng.randrange(len(pool.procs))
        pool.kill_and_restart(victim)
        report.kills += 1
        progress(f"kill {report.kills}: worker {victim} after {seen.finished} plans ended")


def _collect(
    client: PlanClient, run_ids: list[str], timeout_s: float, seen: _Progress
) -> dict[str, PlanResult]:
    results: dict[str, PlanResult] = {}
    end = time.monotonic() + timeout_s
    pending = list(run_ids)
    while pending and time.monotonic() < end:
        statuses = client.statuses(pending)
        still = []
        for run_id in pending:
            status = statuses.get(run_id)
            if status == "SUCCESS":
                results[run_id] = client.result(run_id)
            elif status not in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                still.append(run_id)  # the others never complete: counted as not completed
        pending = still
        seen.finished = len(run_ids) - len(pending)
        if pending:
            time.sleep(0.25)
    return results


def _takeovers(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM actionspace_executors WHERE state = 'gone'").fetchone()
    return int(row[0]) if row else 0


@contextmanager
def _store(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    from actionspace.pgcluster import throwaway_cluster

    with throwaway_cluster("actionspace_sweep") as made:
        yield made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m actionspace.durable.sweep", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8, help="plan nodes at once per worker")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dead-after", type=float, default=10.0, help="seconds of silence before a takeover")
    parser.add_argument("--store", default=None, help="postgresql:// URL (default: a throwaway cluster)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--logs", type=Path, default=None, help="keep the workers' logs in this folder")
    args = parser.parse_args(argv)
    quiet = args.json
    with _store(args.store) as url:
        report = run_sweep(
            url,
            plans=args.plans,
            kills=args.kills,
            workers=args.workers,
            seed=args.seed,
            concurrency=args.concurrency,
            dead_after_s=args.dead_after,
            logs=args.logs,
            progress=(lambda _: None) if quiet else (lambda line: print(line, file=sys.stderr, flush=True)),
        )
    print(json.dumps(report.to_dict(), indent=1))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
