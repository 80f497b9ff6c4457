"""Systematically mutated outputs: the ground truth with one fault, to check that exactly its layer drops.

Each kind changes one thing of a task's ground-truth answer and names the layer that must catch it:

| kind | applies to | the fault | drops at |
|---|---|---|---|
| ``wrong_tool`` | calls, and another tool offered | the first call names another offered tool | select |
| ``dropped_call`` | turns of several calls (parallel) | the last call is left out | select |
| ``extra_call`` | no-call tasks (irrelevance) | a call of the first offered tool | select |
| ``drop_required`` | a call with a required argument | that argument is left out | args |
| ``wrong_type`` | a call with a typed argument | a value of another JSON type | args |
| ``out_of_enum`` | an argument with an enum | a value outside it | args |
| ``unknown_argument`` | any call | an argument the schema does not know | args |

Argument faults are made by the same single-fault generator the validator is checked with
(``_bfcl_mutations``), so the runtime's diagnosis of each (``invalid_arguments`` at one JSON
pointer) is known. Tasks a kind does not apply to get the unchanged ground truth; the policy
records which tasks it mutated.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

from actionspace.errors import ActionspaceError
from actionspace.evaluation._bfcl_mutations import mutations
from actionspace.evaluation.judge import ground_truth_arguments
from actionspace.evaluation.outcomes import LAYERS, TaskOutcome
from actionspace.evaluation.policies import PolicyView, Proposal
from actionspace.evaluation.suite import Suite
from actionspace.types import ToolCall

__all__ = ["DROPS_AT", "MutatedPolicy", "mutation_summary"]

DROPS_AT: Final[dict[str, str]] = {
    "wrong_tool": "select",
    "dropped_call": "select",
    "extra_call": "select",
    "drop_required": "args",
    "wrong_type": "args",
    "out_of_enum": "args",
    "unknown_argument": "args",
}


def _message(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(dict(a))}}
            for i, (n, a) in enumerate(calls)
        ],
    }


class MutatedPolicy:
    """The ground truth of every task with one fault of ``kind`` where it applies.

    Its answers depend on the task alone (``independent``: tasks may be split over processes);
    the outcome of every task it mutated carries ``details["mutation"] == kind`` (see :meth:`note`).
    """

    independent = True

    def __init__(self, suite: Suite, kind: str) -> None:
        if kind not in DROPS_AT:
            raise ActionspaceError(f"unknown mutation {kind!r}; choose from {sorted(DROPS_AT)}")
        self.suite = suite
        self.kind = kind
        self.applied: set[str] = set()

    def propose(self, view: PolicyView) -> Proposal:
        task = self.suite.task(view.task_id)
        turn = task.possible_answers(view.turn)
        offered = [t["function"] for t in view.tools if isinstance(t.get("function"), Mapping)]
        required = {str(t.get("name")): (t.get("parameters") or {}).get("required") or () for t in offered}
        calls: list[tuple[str, Mapping[str, Any]]] = [
            (name, ground_truth_arguments(spec, required.get(name, ())))
            for call in turn
            for name, spec in call.items()
        ]
        mutated = self._mutate(calls, offered)
        if mutated is None:
            return Proposal(raw=_message(calls)) if calls else Proposal()
        self.applied.add(task.id)
        return Proposal(raw=_message(mutated)) if mutated else Proposal()

    def note(self, task_id: str) -> dict[str, Any]:
        """``{"mutation": kind}`` for a task this policy mutated (merged into its outcome), else ``{}``."""
        return {"mutation": self.kind} if task_id in self.applied else {}

    def _mutate(
        self, calls: list[tuple[str, Mapping[str, Any]]], offered: list[Mapping[str, Any]]
    ) -> list[tuple[str, Mapping[str, Any]]] | None:
        names = [str(t.get("name")) for t in offered]
        if self.kind == "extra_call":
            return [(names[0], {})] if not calls and names else None
        if not calls:
            return None
        if self.kind == "dropped_call":
            return calls[:-1] if len(calls) > 1 else None
        if self.kind == "wrong_tool":
            other = next((n for n in names if n not in {c[0] for c in calls}), None)
            return [(other, calls[0][1]), *calls[1:]] if other is not None else None
        schemas = {str(t.get("name")): t.get("parameters") or {} for t in offered}
        name, arguments = calls[0]
        for fault in mutations(
            ToolCall(name=name, arguments=dict(arguments)), schemas.get(name, {}), tool_names=names
        ):
            if fault.kind == self.kind:
                return [(fault.call.name, fault.call.arguments), *calls[1:]]
        return None


def mutation_summary(policy: MutatedPolicy, outcomes: Sequence[TaskOutcome]) -> dict[str, Any]:
    """Where the mutated tasks dropped: ``{"kind", "expected_layer", "applied", "dropped_at", "categories",
    "exact"}`` (``exact``: every mutated task dropped first at the expected layer)."""
    mutated = [o for o in outcomes if o.details.get("mutation") == policy.kind and o.variant == "baseline"]
    dropped: Counter[str] = Counter()
    categories: Counter[str] = Counter()
    for o in mutated:
        first = next((layer for layer in LAYERS if o.layer(layer) is False), "none")
        dropped[first] += 1
        categories[o.steps[0].error_category or "-" if o.steps else "-"] += 1
    expected = DROPS_AT[policy.kind]
    return {
        "kind": policy.kind,
        "expected_layer": expected,
        "applied": len(mutated),
        "dropped_at": dict(dropped),
        "categories": dict(categories),
        "exact": bool(mutated) and set(dropped) == {expected},
    }
