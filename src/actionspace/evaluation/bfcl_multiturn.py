"""BFCL multi-turn ground truth replayed through actionspace plans, checked by BFCL's own state check.

For each entry of ``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param`` and
``multi_turn_long_context`` (200 each in the pinned release):

1. the backend classes the entry involves are loaded from its ``initial_config``, and every public
   method becomes a tool with the read/write sets of :mod:`._bfcl_mt_backends`;
2. each turn's ground-truth calls become the nodes of one :class:`~actionspace.Plan` (no declared
   edges: the runtime orders conflicting nodes by their read/write sets and runs the rest at once);
3. after each turn, BFCL's ``execute_multi_turn_func_call`` runs the same turn on its own
   instances and BFCL's ``state_checker`` compares the two (public attributes, as its checker does);
4. once every turn passed, every write node is sent again under the same run id (same node ids and
   arguments, so the same idempotency keys): each must be replayed from the ledger and the state
   must stay identical.

:func:`run_multiturn` returns a :class:`MultiTurnReport`; its ``to_dict`` is the JSON form.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_mt_backends import (
    DOC_ERRATA,
    bfcl_module,
    instantiate,
    load_docs,
    parse_call,
    signatures,
    tool_specs,
)
from actionspace.plan import Plan, PlanNode, PlanResult
from actionspace.runtime import Runtime

__all__ = [
    "MULTI_TURN_CATEGORIES",
    "EntryResult",
    "MultiTurnEntry",
    "MultiTurnReport",
    "format_multiturn_report",
    "load_multiturn",
    "replay_entry",
    "run_multiturn",
]

MULTI_TURN_CATEGORIES: Final = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiTurnEntry:
    """One BFCL multi-turn test case with its ground truth."""

    id: str
    category: str
    involved_classes: tuple[str, ...]
    initial_config: Mapping[str, Any]
    ground_truth: tuple[tuple[str, ...], ...]
    """Per turn, the call strings BFCL executes, in order."""

    @property
    def long_context(self) -> bool:
        """BFCL loads the backends with their long-context extensions for this category."""
        return "long_context" in self.category


@dataclass(slots=True, kw_only=True)
class EntryResult:
    """The outcome of one entry."""

    id: str
    category: str
    passed: bool = False
    """Every turn's state equals BFCL's, and re-execution changed nothing."""
    failed_turn: int | None = None
    differences: dict[str, Any] = field(default_factory=dict)
    """BFCL's ``state_checker`` verdict, or the re-execution check's, when it failed."""
    nodes: int = 0
    conflict_edges: int = 0
    """Ordering edges the runtime added from read/write conflicts."""
    concurrent_nodes: int = 0
    """Nodes that could run beside another node of their plan (no ordering path between them)."""
    max_parallel: int = 0
    """The most nodes of one plan that the scheduler had running at once."""
    node_errors: dict[str, int] = field(default_factory=dict)
    """Error category → count, over nodes whose observation was an error (BFCL's own errors are data)."""
    reexecuted: int = 0
    replayed: int = 0
    state_unchanged: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category,
            "passed": self.passed,
            "failed_turn": self.failed_turn,
            "differences": {k: repr(v)[:500] for k, v in self.differences.items()},
            "nodes": self.nodes,
            "conflict_edges": self.conflict_edges,
            "concurrent_nodes": self.concurrent_nodes,
            "max_parallel": self.max_parallel,
            "node_errors": self.node_errors,
            "reexecuted": self.reexecuted,
            "replayed": self.replayed,
            "state_unchanged": self.state_unchanged,
        }


@dataclass(slots=True, kw_only=True)
class MultiTurnReport:
    """Figures over every replayed entry."""

    entries: list[EntryResult]
    seconds: float

    @property
    def passed(self) -> int:
        return sum(e.passed for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        by_category: dict[str, dict[str, int]] = {}
        for e in self.entries:
            row = by_category.setdefault(e.category, {"entries": 0, "passed": 0})
            row["entries"] += 1
            row["passed"] += e.passed
        errors: Counter[str] = Counter()
        for e in self.entries:
            errors.update(e.node_errors)
        return {
            "bfcl_version": _bfcl_data.BFCL_VERSION,
            "entries": len(self.entries),
            "passed": self.passed,
            "seconds": round(self.seconds, 2),
            "by_category": by_category,
            "nodes": sum(e.nodes for e in self.entries),
            "conflict_edges": sum(e.conflict_edges for e in self.entries),
            "concurrent_nodes": sum(e.concurrent_nodes for e in self.entries),
            "max_parallel": max((e.max_parallel for e in self.entries), default=0),
            "node_errors": dict(errors),
            "reexecuted_writes": sum(e.reexecuted for e in self.entries),
            "replayed_writes": sum(e.replayed for e in self.entries),
            "reexecution_state_unchanged": sum(e.state_unchanged for e in self.entries),
            "doc_errata": [
                f"{method}.{argument}: {dict(fix)}" for (method, argument), fix in DOC_ERRATA.items()
            ],
            "failures": [e.to_dict() for e in self.entries if not e.passed][:50],
        }


def load_multiturn(
    categories: Iterable[str] = MULTI_TURN_CATEGORIES, data_dir: Path | None = None
) -> list[MultiTurnEntry]:
    """Every entry of the given multi-turn categories, paired with its ground truth by id.

    Raises BfclDataError for an unknown category or when questions and answers disagree.
    """
    data = data_dir if data_dir is not None else _bfcl_data.fetch()
    out: list[MultiTurnEntry] = []
    for category in categories:
        if category not in MULTI_TURN_CATEGORIES:
            raise _bfcl_data.BfclDataError(f"unknown BFCL multi-turn category {category!r}")
        name = f"BFCL_v4_{category}.json"
        answers = {a["id"]: a["ground_truth"] for a in _bfcl_data._lines(data / "possible_answer" / name)}
        for raw in _bfcl_data._lines(data / name):
            truth = answers.pop(raw["id"], None)
            if truth is None:
                raise _bfcl_data.BfclDataError(f"{category}: {raw['id']} has no ground truth")
            out.append(
                MultiTurnEntry(
                    id=raw["id"],
                    category=category,
                    involved_classes=tuple(raw["involved_classes"]),
                    initial_config=raw.get("initial_config") or {},
                    ground_truth=tuple(tuple(turn) for turn in truth),
                )
            )
        if answers:
            raise _bfcl_data.BfclDataError(
                f"{category}: ground truth without a question: {sorted(answers)[:5]}"
            )
    return out


class _Reference:
    """BFCL's executor and state checker, with its per-entry instances released afterwards."""

    def __init__(self) -> None:
        self.utils = bfcl_module("multi_turn_utils")
        self.checker = bfcl_module("multi_turn_checker")
        self.tag = f"actionspace_{uuid.uuid4().hex[:12]}"

    def run_turn(self, entry: MultiTurnEntry, calls: Sequence[str]) -> dict[str, Any]:
        _results, instances = self.utils.execute_multi_turn_func_call(
            func_call_list=list(calls),
            initial_config=entry.initial_config,
            involved_classes=list(entry.involved_classes),
            model_name=self.tag,
            test_entry_id=entry.id,
            long_context=entry.long_context,
        )
        return dict(instances)

    def compare(self, ours: Mapping[str, Any], reference: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self.checker.state_checker(dict(ours), dict(reference)))

    def release(self, entry: MultiTurnEntry) -> None:
        prefix = re.sub(r"[-./:]", "_", f"{self.tag}_{entry.id}_")
        names = vars(self.utils)
        for name in [n for n in names if n.startswith(prefix)]:
            del names[name]


async def replay_entry(
    entry: MultiTurnEntry,
    *,
    data_dir: Path,
    reference: _Reference | None = None,
    drop: Callable[[int, int], bool] | None = None,
    max_concurrency: int = 16,
) -> EntryResult:
    """Replay one entry through a fresh in-memory Runtime and check it against BFCL's execution.

    ``drop(turn, index)`` (for tests) leaves that ground-truth call out of our replay only.
    """
    reference = reference or _Reference()
    result = EntryResult(id=entry.id, category=entry.category)
    instances = {
        c: instantiate(c, entry.initial_config, long_context=entry.long_context)
        for c in entry.involved_classes
    }
    rt = Runtime("memory://", recover_on_start=False)
    try:
        for spec in tool_specs(instances, load_docs(data_dir, entry.involved_classes)):
            rt.add_tool(**spec)
        run_id = f"bfcl-{entry.id}"
        plans = _plans(entry, instances, drop)
        for turn, calls in enumerate(entry.ground_truth):
            plan = plans.get(turn)
            if plan is not None:
                _tally(result, await rt.arun_plan(plan, run_id=run_id, max_concurrency=max_concurrency))
            verdict = reference.compare(instances, reference.run_turn(entry, calls))
            if not verdict.get("valid"):
                result.failed_turn = turn
                result.differences = dict(verdict.get("details", {}).get("differences", {}))
                return result
        fresh = _plans(entry, instances, drop)
        await _reexecute(result, rt, run_id, fresh, instances, reference)
        result.passed = result.state_unchanged
        return result
    finally:
        rt.close()
        reference.release(entry)


def _plans(
    entry: MultiTurnEntry, instances: Mapping[str, Any], drop: Callable[[int, int], bool] | None
) -> dict[int, Plan]:
    sigs = signatures(instances)
    plans: dict[int, Plan] = {}
    for turn, calls in enumerate(entry.ground_truth):
        nodes = []
        for index, text in enumerate(calls):
            if drop is not None and drop(turn, index):
                continue
            call = parse_call(text, sigs)
            nodes.append(PlanNode(id=f"t{turn}_c{index}", tool=call.name, arguments=call.arguments))
        if nodes:
            plans[turn] = Plan(nodes=nodes)
    return plans


def _tally(result: EntryResult, outcome: PlanResult) -> None:
    if outcome.error is not None:
        raise RuntimeError(f"{result.id}: the plan was rejected: {outcome.error.message}")
    ids = list(outcome.nodes)
    result.nodes += len(ids)
    result.conflict_edges += len(outcome.added_edges)
    result.max_parallel = max(result.max_parallel, int(outcome.stats.get("max_parallel", 0)))
    result.concurrent_nodes += _unordered(ids, outcome.edges)
    for obs in outcome.nodes.values():
        if obs.error is not None:
            result.node_errors[obs.error.category] = result.node_errors.get(obs.error.category, 0) + 1


def _unordered(ids: Sequence[str], edges: Iterable[tuple[str, str]]) -> int:
    """How many nodes have at least one other node with no ordering path either way."""
    after: dict[str, set[str]] = {k: set() for k in ids}
    for a, b in edges:
        after[a].add(b)
    for k in reversed(ids):  # edges go forward in listing order, so one backward sweep closes them
        for s in list(after[k]):
            after[k] |= after[s]
    return sum(any(j != k and j not in after[k] and k not in after[j] for j in ids) for k in ids)


async def _reexecute(
    result: EntryResult,
    rt: Runtime,
    run_id: str,
    plans: Mapping[int, Plan],
    instances: Mapping[str, Any],
    reference: _Reference,
) -> None:
    """Send every write again with its original node id; the ledger must replay each one.

    ``plans`` must be freshly parsed: a backend may keep (and later mutate) an argument it was
    given, such as the ``mentions`` list of ``post_tweet``, so the first plans' arguments are no
    longer what was sent.
    """
    before = {name: copy.deepcopy(instance) for name, instance in instances.items()}
    for plan in plans.values():
        writes = [n for n in plan.nodes if rt.catalog.get(n.tool).effect == "write"]
        if not writes:
            continue
        outcome = await rt.arun_plan(Plan(nodes=writes), run_id=run_id)
        result.reexecuted += len(writes)
        result.replayed += sum(bool(o.diagnostics.get("replayed")) for o in outcome.nodes.values())
    verdict = reference.compare(instances, before)
    result.state_unchanged = bool(verdict.get("valid")) and result.replayed == result.reexecuted
    if not result.state_unchanged:
        result.differences = {
            "reexecution": dict(verdict.get("details", {}).get("differences", {})),
            "replayed": f"{result.replayed}/{result.reexecuted}",
        }


def run_multiturn(
    *,
    categories: Iterable[str] = MULTI_TURN_CATEGORIES,
    limit: int | None = None,
    data_dir: Path | None = None,
    progress: Callable[[EntryResult], None] | None = None,
    max_concurrency: int = 16,
) -> MultiTurnReport:
    """Replay every entry (the first ``limit`` of each category when given) and return the figures.

    Fetches the pinned wheel on first use (network needed once). Entries run one after another,
    each in its own Runtime; the nodes of one turn run concurrently where their sets allow.
    """
    data = data_dir if data_dir is not None else _bfcl_data.fetch()
    entries = load_multiturn(categories, data)
    if limit is not None:
        by_category = itertools.groupby(entries, key=lambda e: e.category)
        entries = [e for _, group in by_category for e in itertools.islice(group, limit)]
    started = time.perf_counter()

    async def main() -> list[EntryResult]:
        reference = _Reference()
        results = []
        for entry in entries:
            outcome = await replay_entry(
                entry, data_dir=data, reference=reference, max_concurrency=max_concurrency
            )
            results.append(outcome)
            if progress is not None:
                progress(outcome)
        return results

    results = asyncio.run(main())
    return MultiTurnReport(entries=results, seconds=time.perf_counter() - started)


def format_multiturn_report(report: Mapping[str, Any]) -> str:
    """A few lines for a terminal, from :meth:`MultiTurnReport.to_dict`."""
    lines = [
        f"BFCL {report['bfcl_version']} multi-turn replay: {report['passed']}/{report['entries']} entries "
        f"match BFCL's state check ({report['seconds']} s)",
    ]
    for category, row in report["by_category"].items():
        lines.append(f"  {category:<26} {row['passed']:>4}/{row['entries']}")
    lines += [
        f"plan nodes {report['nodes']}, conflict edges added {report['conflict_edges']}, "
        f"nodes free to run beside another {report['concurrent_nodes']}, "
        f"max parallel {report['max_parallel']}",
        f"re-executed writes {report['reexecuted_writes']}, replayed from the ledger "
        f"{report['replayed_writes']}; state unchanged in {report['reexecution_state_unchanged']} entries",
    ]
    for erratum in report["doc_errata"]:
        lines.append(f"BFCL doc erratum applied: {erratum}")
    if report["node_errors"]:
        lines.append(f"node errors (BFCL's own failing calls included): {report['node_errors']}")
    for failure in report["failures"][:10]:
        lines.append(f"  FAIL {failure['id']} turn {failure['failed_turn']}: {failure['differences']}")
    return "\n".join(lines)
