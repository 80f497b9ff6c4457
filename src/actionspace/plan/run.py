"""Entry point behind ``Runtime.arun_plan``: read, check, trace and schedule one plan."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from typing import Any

from actionspace.discovery.runs import RunState, resolve
from actionspace.errors import ActionError, ConfigurationError
from actionspace.plan.check import CheckedNode, CheckedPlan, check_plan
from actionspace.plan.control import tool_limits_of
from actionspace.plan.engine import PlanEngine
from actionspace.plan.model import InvalidPlan, Plan, PlanResult
from actionspace.plan.scheduler import CancelScope, Scheduler, ToolLimit
from actionspace.policy.principal import Principal
from actionspace.trace._encoded import encoded
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.recorder import Recorder

__all__ = ["DEFAULT_CONCURRENCY", "arun_plan", "preflight"]

DEFAULT_CONCURRENCY = 16
"""Nodes running at once when neither the call nor the plan says."""


def preflight(
    engine: PlanEngine,
    plan: Plan | Mapping[str, Any],
    run: RunState,
    principal: Principal,
    environments: Mapping[str, Any] | None = None,
) -> CheckedPlan | ActionError:
    """Every check a plan passes before anything of it runs: its JSON form, ids and references,
    tools and versions, permissions, reference types, cycles and read/write conflicts.

    ``actionspace plan check`` and :func:`arun_plan` both call this, so they never disagree.
    """
    if not isinstance(plan, Plan):
        try:
            plan = Plan.from_dict(plan)
        except InvalidPlan as exc:
            return exc.error
    return check_plan(
        plan, lambda name: resolve(engine.catalog, run, name), principal, environments, engine.checked_plans
    )


async def arun_plan(
    engine: PlanEngine,
    plan: Plan | Mapping[str, Any],
    *,
    run_id: str,
    principal: Principal | None = None,
    environments: Mapping[str, Any] | None = None,
    max_concurrency: int | None = None,
    tool_limits: Mapping[str, int | ToolLimit] | None = None,
    cancel: CancelScope | None = None,
    retry_of: PlanResult | None = None,
) -> PlanResult:
    """Check ``plan`` and run it; a rejected plan is a result with ``status="error"`` and ``error`` set.

    Raises ConfigurationError (before anything is recorded) for a tool limit that admits no call,
    a ``max_concurrency`` that is not an integer, or a ``retry_of`` that is not a :class:`PlanResult`.
    """
    limits = tool_limits_of(tool_limits)
    if max_concurrency is not None and type(max_concurrency) is not int:
        raise ConfigurationError(f"max_concurrency must be an integer or None, got {max_concurrency!r}")
    if retry_of is not None and not isinstance(retry_of, PlanResult):
        raise ConfigurationError(f"retry_of must be a PlanResult or None, got {type(retry_of).__name__}")
    run = engine.run(run_id, principal)
    who = principal or run.principal
    checked = preflight(engine, plan, run, who, environments)
    if isinstance(checked, ActionError):
        return await _rejected(engine, run.run_id, run, checked)
    rec = Recorder(run, None)
    rec.add("plan_started", _started(engine, run, checked, retry_of is not None))
    await engine.aflush(rec)
    limit = max_concurrency or checked.max_concurrency or DEFAULT_CONCURRENCY
    scheduler = Scheduler(
        engine,
        run,
        who,
        checked,
        max_concurrency=limit,
        tool_limits=limits,
        cancel=cancel,
        retry_of=retry_of,
    )
    with scheduler.open_to_close():  # Runtime.close() ends it, and waits for its plan_finished
        result = await scheduler.run()
        # the model is shown every node's observation now (what that reads of each was taken when
        # it settled), and the trace says which failed (the scheduler noted it then too)
        run.flow.observed_taken(scheduler.shown())
        rec = Recorder(run, None)
        rec.add(
            "plan_finished",
            {
                "status": result.status,
                "failed": scheduler.failed,
                **result.stats,
            },
        )
        await engine.aflush(rec)
    return result


def _started(engine: PlanEngine, run: RunState, checked: CheckedPlan, retry: bool) -> dict[str, Any]:
    """``plan_started``'s data. Handed to the memory trace store as it stands (no label to add,
    nothing between the recorder and the store), it is the checked plan's, encoded once
    (:class:`~actionspace.trace._encoded.Encoded`): a plan object run again keeps its check, and
    the store keeps the same encoding for each of its runs instead of encoding it again. Any
    other store gets data of its own each run."""
    context = run.flow.context
    sink = getattr(engine, "sink", None)  # (a PlanEngine need not have one)
    if (
        getattr(sink, "__func__", None) is not _MEMORY_APPEND
        or context.secret  # labelled by the recorder: a copy of it, sharing its lists, is stored
        or context.readers is not None
    ):
        return _started_data(checked, retry)
    kept = checked.started
    if kept is None:
        kept = checked.started = {}
    found = kept.get(retry, _NOT_YET)
    if found is _NOT_YET:
        found = kept[retry] = encoded(_started_data(checked, retry))
    return _started_data(checked, retry) if found is None else found


_MEMORY_APPEND = MemoryTraceStore.append_records
_NOT_YET = object()


def _started_data(checked: CheckedPlan, retry: bool) -> dict[str, Any]:
    """``plan_started``'s data, made anew (each record its own dicts)."""
    listed = itertools.islice(checked.nodes.values(), 1000)
    return {
        "nodes": list(map(dict.copy, _bare_entries(checked)))
        if checked.bare
        else [
            # _node_event's entry for a node with nothing more to say, made here
            {"id": c.node.id, "tool": c.specs[0].key}
            if not (c.reads or c.writes or c.refs or len(c.specs) > 1 or c.specs[0].requires_approval)
            else _node_event(c)
            for c in listed
        ],
        "edges": list(map(list, itertools.islice(checked.edges, 5000))),
        "added_edges": checked.added_edges[:1000],
        "retry": retry,
    }


def _bare_entries(checked: CheckedPlan) -> list[dict[str, str]]:
    """``plan_started``'s entries of a bare plan (its id and tool, as :func:`_node_event`'s), made
    once per checked plan (a plan run again keeps its check)."""
    entries = checked.entries
    if entries is None:
        listed = list(itertools.islice(checked.nodes.values(), 1000))
        specs = list(map(_SPECS, listed))  # a bare plan's nodes of one tool share their specs
        key = {i: s[0].key for i, s in dict(zip(map(id, specs), specs, strict=True)).items()}  # once per tool
        # {"id": node id, "tool": its tool's key} per node, made in C
        ids = zip(_IDS, map(_NODE_ID, listed), strict=False)  # (_IDS, _TOOLS: endless)
        tools = zip(_TOOLS, map(key.__getitem__, map(id, specs)), strict=False)
        entries = checked.entries = list(map(dict, zip(ids, tools, strict=True)))
    return entries


_SPECS = operator.attrgetter("specs")
_NODE_ID = operator.attrgetter("node.id")
_IDS = itertools.repeat("id")
_TOOLS = itertools.repeat("tool")


def _node_event(c: CheckedNode) -> dict[str, Any]:
    event: dict[str, Any] = {"id": c.node.id, "tool": c.specs[0].key}
    if not (c.reads or c.writes or c.refs or c.specs[0].requires_approval or len(c.specs) > 1):
        return event
    if c.members:  # an atomic group (it writes): a member runs only with it, never resumed alone
        event["members"] = [m.id for m in c.members]
    if c.reads:
        event["reads"] = list(c.reads)
    if c.writes:
        event["writes"] = list(c.writes)
    if c.refs:
        event["refs"] = sorted({r.node for r in c.refs})
    if any(spec.requires_approval for spec in c.specs):
        event["requires_approval"] = True  # held for a person before it runs; its branch waits
    return event


async def _rejected(engine: PlanEngine, run_id: str, run: RunState, error: ActionError) -> PlanResult:
    rec = Recorder(run, None)
    rec.add("plan_rejected", {"category": error.category, "message": error.message[:500]})
    await engine.aflush(rec)
    return PlanResult(run_id=run_id, status="error", error=error)
