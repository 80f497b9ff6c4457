"""One plan node through the call engine: its arguments, the call, its verifier and its records.

:class:`NodeRunner` is the half of the scheduler that runs a single node; the other half
(:mod:`actionspace.plan.scheduler`) decides when nodes start and what their results release.

- References are substituted with the final values of the nodes they name; a missing path or
  inputs read from two versions of one resource fail the node before its tool is called.
- A node without references, alternatives, members or verifier (a *plain* node) takes
  :meth:`NodeRunner._plain`: the same engine calls and records with nothing to substitute.
- Records of finished calls are buffered and reach the trace store every ``FLUSH_S`` seconds,
  every ``FLUSH_RECORDS`` records, and at the end of the plan.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Mapping
from types import MappingProxyType
from typing import Any, cast

from actionspace.discovery.runs import RunState
from actionspace.errors import ActionError, FieldError, said
from actionspace.execution.ready import Ready
from actionspace.plan.check import CheckedNode, CheckedPlan, canonical_arguments
from actionspace.plan.conflicts import call_sets, overlaps
from actionspace.plan.engine import PlanEngine
from actionspace.plan.refs import MISSING, Ref, TemplateTooLarge, find_refs, parse_ref, substitute, walk
from actionspace.policy.flow import bindings, label_of
from actionspace.policy.labels import Label
from actionspace.policy.principal import Principal
from actionspace.policy.stamped import restamped
from actionspace.trace.events import CompactNode, EventRecord
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, ToolCall
from actionspace.validation.verdicts import Rejected

__all__ = ["FLUSH_RECORDS", "FLUSH_S", "NodeRunner", "Started", "is_plain"]

_NO_MARKS: Mapping[str, str] = MappingProxyType({})

FLUSH_S = 0.05
"""Trace records of finished nodes reach the store at least this often (seconds), and at the end."""
FLUSH_RECORDS = 2000


Started = tuple[Recorder, Awaitable[Observation]]
"""A plain node's call begun on the precompiled path whose tool waits: its recorder, and the rest."""


def is_plain(node: CheckedNode) -> bool:
    """A node with nothing to substitute, race, group or verify: one call of its tool."""
    return not (node.refs or node.members or node.node.first_of or node.node.verify is not None)


class NodeRunner:
    """Runs one node through the engine; the scheduler owns the state read and written here."""

    engine: PlanEngine
    run_state: RunState
    principal: Principal
    plan: CheckedPlan
    results: dict[str, Observation]
    dispatched_args: dict[str, Mapping[str, Any]]
    pending: list[EventRecord]
    pending_nodes: list[CompactNode]
    flushed_at: float
    _spare: Recorder | None
    kept: dict[str, Any]
    """The plan's tools' precompiled entries, each checked once while nothing they were decided
    from changes (``Engine.plain_node``; this run and principal only)."""
    """An empty recorder the next plain node takes (a node that answered at once left it)."""
    _closed: bool
    """The plan ended: its scheduler flushed what it held and starts nothing more."""

    def _aborted_read(self, k: str, reason: str) -> Observation:
        """A read stopped by an abort (the scheduler's part)."""
        raise NotImplementedError

    def _call_id(self, k: str) -> str:
        return f"{self.run_state.run_id}:{k}"

    def _record(self, call_id: str | None, kind: str, data: Mapping[str, Any]) -> None:
        rec = Recorder(self.run_state, call_id)
        rec.add(kind, data)
        self._buffer(rec)

    def _plain_now(self, k: str, node: CheckedNode) -> Observation | Started | None:
        """A plain node's call on the precompiled path, begun here without a coroutine of ours:
        its observation when the tool answered at once (the records buffered), the begun call
        when the tool waits (:meth:`_ended` ends it), None when the node does not qualify
        (nothing recorded; :meth:`_plain` takes it)."""
        spec = node.node
        if spec.provenance:
            return None
        raw = spec.arguments
        # a copy when nested: a tool that mutates its arguments must not change the plan
        arguments = raw if node.scalar_arguments else substitute(raw, _no_refs)
        run = self.run_state
        rec = self._spare  # an emptied recorder of a node that answered at once, or a new one
        if rec is None:
            rec = Recorder(run, f"{run.run_id}:{k}")
        else:
            self._spare = None
            rec.call_id = f"{run.run_id}:{k}"
        engine = self.engine
        try:
            quick = engine.plain_node(run, spec.tool, dict(arguments), k, self.principal, rec, self.kept)
        except asyncio.CancelledError:  # the tool's first step raised it: as _plain, then _body
            rec.add("plan_node_cancelled", {"node": k, "phase": "running"})
            self._buffer(rec)
            return self._aborted_read(k, "abort requested; the read was cancelled")
        except Exception as exc:
            quick = engine.internal(exc, rec)
        if quick is None:  # nothing recorded: the recorder serves the next node
            self._spare = rec
            return None
        # (its arguments are not kept in dispatched_args: only a write's cancel hook reads them,
        # and a call on the precompiled path has no side effects)
        if type(quick) is Observation:
            nodes = rec.nodes
            if nodes is None or rec.records:
                self._buffer(rec)
            else:  # _buffer for the one compact record of a node that answered at once
                held = self.pending_nodes
                held += nodes  # (the list itself, extended in place)
                rec.nodes = None
                now = _monotonic()
                if (
                    now - self.flushed_at >= FLUSH_S
                    or len(self.pending) + 5 * len(held) >= FLUSH_RECORDS
                    or self._closed
                ):
                    self._flush_pending(now)
            if rec.call is None:  # emptied, and held by nothing else: the next node's
                self._spare = rec
            return quick
        return rec, cast("Awaitable[Observation]", quick)

    async def _ended(self, k: str, rec: Recorder, pending: Awaitable[Observation]) -> Observation:
        """The observation ``pending`` gives for node ``k`` (a failure of ours typed, a cancel
        recorded and raised), the call's records buffered whatever happens."""
        try:
            return await pending
        except asyncio.CancelledError:
            rec.add("plan_node_cancelled", {"node": k, "phase": "running"})
            raise
        except Exception as exc:
            return self.engine.internal(exc, rec)
        finally:
            self._buffer(rec)

    async def _plain(self, node: CheckedNode) -> Observation:
        """:meth:`_node` for a plain node (see :func:`is_plain`): the same call, fewer steps."""
        spec = node.node
        k = spec.id
        now = self._plain_now(k, node)  # the precompiled path, with no call object
        if isinstance(now, Observation):
            return now
        if now is not None:
            return await self._ended(k, *now)
        raw = spec.arguments
        # a copy when nested: a tool that mutates its arguments must not change the plan
        arguments = raw if node.scalar_arguments else substitute(raw, _no_refs)
        self.dispatched_args[k] = arguments
        run = self.run_state
        call_id = f"{run.run_id}:{k}"
        rec = Recorder(run, call_id)
        marks = dict(spec.provenance) if spec.provenance else _NO_MARKS
        call = ToolCall(name=spec.tool, arguments=dict(arguments), id=call_id, provenance=marks)
        pending = self.engine.anode(run, call, principal=self.principal, rec=rec, node_id=k)
        return await self._ended(k, rec, pending)

    def _arguments(
        self,
        node: CheckedNode,
        raw: Mapping[str, Any],
    ) -> Mapping[str, Any] | Observation:
        """Substitute references with final values; a missing path or incompatible join fails
        the node."""
        if not node.refs:
            # a copy: a tool that mutates its arguments must not change the plan (or a retry's key)
            nested = any(isinstance(v, (dict, list)) for v in raw.values())
            return substitute(raw, _no_refs) if nested else raw
        missing: list[FieldError] = []

        def resolve(text: str) -> Any:
            ref = parse_ref(text)
            value = self._ref_value(ref)
            if value is MISSING:
                missing.append(
                    FieldError(
                        path=f"$ref:{text}",
                        message=f"{text} does not exist in {ref.node}'s observation",
                    )
                )
                return None
            return value

        try:
            arguments: Mapping[str, Any] = substitute(raw, resolve)
        except TemplateTooLarge as exc:
            missing.insert(0, FieldError(path="$template", message=str(exc)))
        if missing:
            error = ActionError.of(
                "invalid_arguments", f"node {node.id}: {missing[0].message}", field_errors=missing
            )
            return self._failed_before_call(node, error)
        clash = self._join_clash(node)
        if clash is not None:
            return self._failed_before_call(node, clash)
        return arguments

    def _undeclared_writes(self, node: CheckedNode, arguments: Mapping[str, Any]) -> Observation | None:
        """A node that narrows its writes (``PlanNode.writes``) while references fill its tool's
        write templates: the check saw only the references, so the writes of the resolved
        arguments must still be covered, or the node fails before its tool (it could write a
        resource it was not ordered against). None when they are covered."""
        declared = node.node.writes
        assert declared is not None
        spec = node.specs[0]
        _reads, writes = call_sets(spec, canonical_arguments(spec, arguments))
        hidden = [w for w in writes if not any(overlaps(w, mine) for mine in declared)]
        if not hidden:
            return None
        why = f"the resolved arguments write {hidden[:5]}, which the node's writes {list(declared)[:5]} hide"
        error = ActionError.of(
            "invalid_arguments",
            f"node {node.id}: {why}",
            field_errors=[FieldError(path=f"/nodes/{node.index}/writes", message=why)],
        )
        return self._failed_before_call(node, error)

    def _failed_before_call(self, node: CheckedNode, error: ActionError) -> Observation:
        """The node failed before its call: the error may quote its resolved inputs, so it carries
        their labels and the run's (what its literal arguments carry)."""
        spec = node.specs[0]
        failed = Observation.failure(
            error, call_id=self._call_id(node.id), tool=spec.name, tool_version=spec.version
        )
        label = self.run_state.flow.context
        for ref in node.refs:
            source = self.results.get(ref.node)
            label = label if source is None else label.join(label_of(source))
        return restamped(failed, label)

    def _ref_value(self, ref: Ref, source: Observation | None = None) -> Any:
        """The value ``ref`` points at (:data:`MISSING` when the path does not exist)."""
        if source is None:
            source = self.results.get(ref.node)
            if source is None:
                return MISSING
        whole = ref.top != "data"  # data is walked in place; anything else needs the dict form
        return walk(source.to_dict(), ref.path) if whole else walk(source.data, ref.path[1:])

    def _ref_label(self, text: str) -> tuple[str, Label] | None:
        """(call id, output label) of the node a reference points at."""
        source = self.results.get(parse_ref(text).node)
        return None if source is None else (source.call_id, label_of(source))

    def _join_clash(self, node: CheckedNode) -> ActionError | None:
        """Inputs read from overlapping resources must report the same resource version."""
        sources = list(dict.fromkeys(r.node for r in node.refs))
        if len(sources) < 2:
            return None
        for i, a in enumerate(sources):
            va = self.results[a].provenance.resource_version
            if va is None:
                continue
            ra = self.plan.nodes[a].reads + self.plan.nodes[a].writes
            for b in sources[i + 1 :]:
                vb = self.results[b].provenance.resource_version
                if vb is None or vb == va:
                    continue
                rb = self.plan.nodes[b].reads + self.plan.nodes[b].writes
                pairs = ((x, y) for x in ra for y in rb if x != "*" and y != "*")
                shared = next((x for x, y in pairs if overlaps(x, y)), None)
                if shared is not None:
                    return ActionError.of(
                        "stale_reference",
                        f"node {node.id} joins {a} (version {va}) and {b} (version {vb}) of "
                        f"{shared!r}; observe again so both come from one version",
                        details={"inputs": {a: va, b: vb}, "resource": shared},
                        current_version=vb,
                    )
        return None

    def _provenance(self, node: CheckedNode, arguments: Mapping[str, Any]) -> Mapping[str, str]:
        if not node.refs and not node.node.provenance:
            return _NO_MARKS
        marks = dict(node.node.provenance)
        for name, value in arguments.items():
            for _pointer, raw in find_refs(value):
                marks[name] = f"tool_result:{self._call_id(parse_ref(raw).node)}"
                break
        return marks

    async def _call(
        self,
        node: CheckedNode,
        node_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        raw: Mapping[str, Any] | None = None,
    ) -> Observation:
        """One call of ``node``; ``raw``: the arguments as the plan wrote them, references and all
        (an alternative's own, for a ``first_of`` node), whose references bind their labels."""
        raw_args = raw if raw is not None else node.node.arguments if not node.node.first_of else {}
        call = ToolCall(
            name=tool,
            arguments=dict(arguments),
            id=f"{self.run_state.run_id}:{node_id}",
            provenance=self._provenance(node, raw_args),
        )
        rec = Recorder(self.run_state, call.id)
        # $ref arguments carry their labels
        bound = bindings(raw_args, self._ref_label) if node.refs else None
        return await self._ended(node_id, rec, self._prepared(call, rec, node_id, bound))

    async def _prepared(
        self, call: ToolCall, rec: Recorder, node_id: str, bound: Mapping[str, Any] | None
    ) -> Observation:
        ready = await self.engine.aprepare(
            self.run_state, call, principal=self.principal, rec=rec, node_id=node_id, bound=bound
        )
        return await self.engine.aexecute(ready, rec) if isinstance(ready, Ready) else ready

    def _buffer(self, rec: Recorder) -> None:
        """Keep a call's whole records; hand them to the store at most every FLUSH_S (and at the
        end)."""
        if rec.records:
            self.pending += rec.records
            rec.records = []
        if rec.nodes:  # a plain node's compact record (pipeline/fast_nodes.py): five events
            self.pending_nodes += rec.nodes
            rec.nodes = None
        now = time.monotonic()
        held = len(self.pending) + 5 * len(self.pending_nodes)
        # once the plan ended (its last flush done), a call ending late (cancelled) goes at once
        if now - self.flushed_at >= FLUSH_S or held >= FLUSH_RECORDS or self._closed:
            self._flush_pending(now)

    def _flush_pending(self, now: float) -> None:
        self.flushed_at = now
        if self.pending or self.pending_nodes:
            rec = Recorder(self.run_state, None)
            rec.records, self.pending = self.pending, []
            if self.pending_nodes:
                rec.nodes, self.pending_nodes = self.pending_nodes, []
            self.engine.flush(rec)

    def _verify(self, node: CheckedNode, obs: Observation) -> Observation:
        check = node.node.verify
        if check is None or obs.status != "ok":
            return obs
        try:
            verdict = check(obs)
        except Exception as exc:
            why = f"the verifier of {node.id} raised {type(exc).__name__}: {said(exc)}"
            verdict = Rejected(ActionError.of("internal", why))
        rejected = isinstance(verdict, Rejected)
        data: dict[str, Any] = {"node": node.id, "verdict": "rejected" if rejected else "accepted"}
        if isinstance(verdict, Rejected):
            data["category"] = verdict.error.category
            data["message"] = verdict.error.message[:300]
        self._record(obs.call_id, "verified", data)
        if not isinstance(verdict, Rejected):
            return obs
        return dataclasses.replace(obs, status="error", error=verdict.error)


_monotonic = time.monotonic  # read once a node: no attribute lookup on the module


def _no_refs(text: str) -> Any:
    return {"$ref": text}
