"""BFCL (Berkeley Function Calling Leaderboard) as an external check of the validate stage.

Three questions, answered over the eight single-turn Python categories of the pinned release:

1. Does every BFCL function doc turn into a valid JSON Schema (draft 2020-12) tool?
2. Does the runtime accept every BFCL ground-truth call (the first acceptable value per argument)?
   The few it rejects are defects of the data, listed by id with the validator's reason.
3. Does every single-fault mutation of an accepted call get the specific error it should (missing
   required argument, unknown tool, unknown argument, wrong type, value outside the enum)?

:func:`run_bfcl_checks` returns the figures as a JSON-ready dict; :func:`format_bfcl_report` renders
them for a terminal. Calls go through :class:`actionspace.Runtime` with tools that echo their
arguments (``effect="none"``), one runtime per BFCL entry so same-named tools never meet.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import jsonschema_rs

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, ActionspaceError, ToolDefinitionError
from actionspace.evaluation._bfcl_data import (
    BFCL_VERSION,
    CATEGORIES,
    BfclDataError,
    BfclEntry,
    default_cache_dir,
    fetch,
    load,
    load_all,
)
from actionspace.evaluation._bfcl_mutations import (
    MUTATION_KINDS,
    Mutation,
    MutationKind,
    json_pointer,
    mutations,
)
from actionspace.evaluation._bfcl_schema import (
    JSON_SCHEMA_DRAFT,
    BfclAnswerError,
    first_answer,
    to_input_schema,
    to_tool_spec,
)
from actionspace.runtime import Runtime
from actionspace.types import ToolCall
from actionspace.validation.validator import CompiledTool, compile_tool, validate
from actionspace.validation.verdicts import Rejected

__all__ = [
    "BFCL_VERSION",
    "CATEGORIES",
    "JSON_SCHEMA_DRAFT",
    "MUTATION_KINDS",
    "BfclAnswerError",
    "BfclDataError",
    "BfclEntry",
    "Mutation",
    "MutationKind",
    "call_key",
    "default_cache_dir",
    "fetch",
    "first_answer",
    "format_bfcl_report",
    "json_pointer",
    "load",
    "load_all",
    "mutations",
    "run_bfcl_checks",
    "to_input_schema",
    "to_tool_spec",
]

Stage = Literal["runtime", "validator"]


def call_key(entry_id: str, index: int) -> str:
    """How a ground-truth call is named in reports: ``<entry id>#<index of the call>``."""
    return f"{entry_id}#{index}"


def _echo(**arguments: Any) -> dict[str, Any]:
    return arguments


class _Session:
    """One entry's tools behind the chosen stage; ``check`` returns the error a call gets, or None."""

    def __init__(self, specs: Sequence[ToolSpec], stage: Stage) -> None:
        self._runtime: Runtime | None = None
        self._compiled: dict[str, CompiledTool] = {}
        self._run_id = ""
        if stage == "validator":
            self._compiled = {s.name: compile_tool(s) for s in specs}
            return
        runtime = self._runtime = Runtime("memory://")
        for spec in specs:
            runtime.add_tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                fn=_echo,
                effect="none",
            )
        self._run_id = runtime.new_run()
        runtime.offer(run_id=self._run_id)

    def check(self, call: ToolCall) -> ActionError | None:
        if self._runtime is None:
            return self._validate(call)
        observation = self._runtime.call(call, run_id=self._run_id)
        if observation.status == "ok":
            return None
        return observation.error or ActionError.of("internal", f"status {observation.status}, no error")

    def _validate(self, call: ToolCall) -> ActionError | None:
        tool = self._compiled.get(call.name)
        if tool is None:
            return ActionError.of("unknown_tool", f"no tool {call.name!r}")
        verdict = validate(tool, call.arguments, {}, None).verdict
        return verdict.error if isinstance(verdict, Rejected) else None

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()


def _load_docs(entry: BfclEntry, failures: dict[str, str]) -> list[ToolSpec]:
    specs = []
    for doc in entry.functions:
        try:
            spec = to_tool_spec(doc, fn=_echo)
            if not jsonschema_rs.meta.is_valid(dict(spec.input_schema)):
                raise ToolDefinitionError("the converted schema is not valid draft 2020-12")
            compile_tool(spec)
        except (ActionspaceError, ValueError) as exc:
            failures[f"{entry.id}:{doc.get('name')}"] = str(exc)
            continue
        specs.append(spec)
    return specs


def _reason(error: ActionError) -> str:
    if error.field_errors:
        return "; ".join(f"{f.path}: {f.message}" for f in error.field_errors)
    return f"{error.category}: {error.message}"


def _mutation_outcome(mutation: Mutation, error: ActionError | None) -> str | None:
    """None when the mutation got exactly the error it must; else what happened instead."""
    if error is None:
        return "accepted"
    if error.category != mutation.category:
        return f"{error.category} instead of {mutation.category}: {error.message}"
    paths = {f.path for f in error.field_errors}
    if mutation.path is not None and paths != {mutation.path}:
        return f"field errors at {sorted(paths)} instead of {mutation.path!r}"
    return None


class _Tally:
    def __init__(self, categories: Sequence[str]) -> None:
        self.docs = {c: {"total": 0, "loaded": 0} for c in categories}
        self.calls = {c: {"total": 0, "accepted": 0} for c in categories}
        self.doc_failures: dict[str, str] = {}
        self.rejected: dict[str, str] = {}
        self.mutations: dict[MutationKind, dict[str, Any]] = {
            k: {"generated": 0, "rejected_as_expected": 0, "misses": {}} for k in MUTATION_KINDS
        }

    def entry(self, entry: BfclEntry, stage: Stage) -> None:
        specs = _load_docs(entry, self.doc_failures)
        self.docs[entry.category]["total"] += len(entry.functions)
        self.docs[entry.category]["loaded"] += len(specs)
        session = _Session(specs, stage)
        try:
            for index, answer in enumerate(entry.ground_truth):
                self._ground_truth(entry, index, answer, specs, session)
        finally:
            session.close()

    def _ground_truth(
        self,
        entry: BfclEntry,
        index: int,
        answer: Mapping[str, Any],
        specs: Sequence[ToolSpec],
        session: _Session,
    ) -> None:
        key = call_key(entry.id, index)
        self.calls[entry.category]["total"] += 1
        try:
            call = first_answer(answer, entry.functions)
        except BfclAnswerError as exc:
            self.rejected[key] = f"no call can be built: {exc}"
            return
        error = session.check(call)
        if error is not None:
            self.rejected[key] = _reason(error)
            return
        self.calls[entry.category]["accepted"] += 1
        if index == 0:
            schema = next(s.input_schema for s in specs if s.name == call.name)
            names = [s.name for s in specs]
            for mutation in mutations(call, schema, tool_names=names):
                self._mutation(key, mutation, session)

    def _mutation(self, key: str, mutation: Mutation, session: _Session) -> None:
        tally = self.mutations[mutation.kind]
        tally["generated"] += 1
        miss = _mutation_outcome(mutation, session.check(mutation.call))
        if miss is None:
            tally["rejected_as_expected"] += 1
        else:
            tally["misses"][key] = miss

    def report(self, seconds: float, stage: Stage) -> dict[str, Any]:
        docs_total = sum(d["total"] for d in self.docs.values())
        calls_total = sum(c["total"] for c in self.calls.values())
        accepted = sum(c["accepted"] for c in self.calls.values())
        return {
            "suite": "bfcl",
            "version": BFCL_VERSION,
            "stage": stage,
            "docs": {
                "total": docs_total,
                "loaded": sum(d["loaded"] for d in self.docs.values()),
                "by_category": self.docs,
                "failures": self.doc_failures,
            },
            "ground_truth": {
                "total": calls_total,
                "accepted": accepted,
                "rate": _rate(accepted, calls_total),
                "by_category": self.calls,
                "rejected": self.rejected,
            },
            "mutations": {
                kind: {**tally, "rate": _rate(tally["rejected_as_expected"], tally["generated"])}
                for kind, tally in self.mutations.items()
            },
            "seconds": round(seconds, 2),
        }


def _rate(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 6)


def run_bfcl_checks(
    data_dir: Path | None = None, *, categories: Sequence[str] = CATEGORIES, stage: Stage = "runtime"
) -> dict[str, Any]:
    """Load, accept and mutate every BFCL entry of ``categories``; return the figures.

    ``data_dir`` defaults to :func:`fetch` (downloads the pinned wheel once). ``stage="validator"``
    checks with the validate stage alone (no runtime). The result is JSON-ready::

        {"suite", "version", "stage", "seconds",
         "docs": {"total", "loaded", "by_category": {cat: {"total", "loaded"}}, "failures": {id: why}},
         "ground_truth": {"total", "accepted", "rate", "by_category": {cat: {"total", "accepted"}},
                          "rejected": {"<entry id>#<call>": reason}},
         "mutations": {kind: {"generated", "rejected_as_expected", "rate", "misses": {id: what}}}}

    Raises BfclDataError when the data cannot be fetched or read.
    """
    start = time.perf_counter()
    data = data_dir if data_dir is not None else fetch()
    tally = _Tally(categories)
    for category in categories:
        for entry in load(category, data):
            tally.entry(entry, stage)
    return tally.report(time.perf_counter() - start, stage)


def format_bfcl_report(report: Mapping[str, Any]) -> str:
    """The figures of :func:`run_bfcl_checks` as plain text, one fact per line."""
    docs, truth, muts = report["docs"], report["ground_truth"], report["mutations"]
    lines = [
        f"BFCL {report['version']} through the {report['stage']} ({report['seconds']} s)",
        f"docs loaded: {docs['loaded']}/{docs['total']}",
    ]
    lines += [f"  {c}: {d['loaded']}/{d['total']}" for c, d in docs["by_category"].items()]
    lines += [f"  failed {k}: {v}" for k, v in docs["failures"].items()]
    lines.append(f"ground truth accepted: {truth['accepted']}/{truth['total']}")
    lines += [f"  {c}: {d['accepted']}/{d['total']}" for c, d in truth["by_category"].items()]
    lines += [f"  rejected {k}: {v}" for k, v in truth["rejected"].items()]
    lines.append("mutations rejected with the expected error:")
    for kind, tally in muts.items():
        rate = "n/a" if tally["rate"] is None else f"{100 * tally['rate']:.2f} %"
        lines.append(f"  {kind}: {tally['rejected_as_expected']}/{tally['generated']} ({rate})")
        lines += [f"    missed {k}: {v}" for k, v in tally["misses"].items()]
    return "\n".join(lines)
