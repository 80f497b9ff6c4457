"""Interface ablations: the same policy and tasks with exactly one factor of the tool interface changed.

Each ablation is a pure, seeded transformation of what the policy is shown (tool definitions in the
JSON-Schema ``{"name", "description", "parameters"}`` form) and, where names change, of the ground
truth used to judge it, so only the interface differs between the baseline and the variant:

- ``names_hidden``: tool names replaced by opaque ids (``tool_01`` …);
- ``descriptions_perturbed``: each description reduced to a generic sentence that names no purpose;
- ``enums_dropped``: every ``enum`` removed from the parameter schemas;
- ``candidates_widened``: near-name decoys (same schema, confusable names) added next to every tool;
- ``feedback_bare``: error feedback to the policy reduced to the bare word ``error`` (see :func:`feedback`).

:func:`counterfactual` builds the argument test: change one key fact in the request; the argument
built from it must change too.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ABLATIONS",
    "Ablation",
    "Counterfactual",
    "counterfactual",
    "feedback",
]

ToolDef = Mapping[str, Any]
ExpectedTurns = Sequence[Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Ablation:
    """One interface factor changed: tools shown, and the ground truth renamed to match."""

    name: str
    tools: Callable[[Sequence[ToolDef], int], list[dict[str, Any]]]
    """(tool definitions, seed) → the definitions the policy sees."""
    renames: Callable[[Sequence[ToolDef], int], dict[str, str]]
    """(tool definitions, seed) → original name → the name shown (identity for most ablations)."""

    def expected(
        self, turns: ExpectedTurns, tools: Sequence[ToolDef], seed: int
    ) -> list[list[dict[str, Any]]]:
        """The ground truth with tool names as the policy sees them."""
        names = self.renames(tools, seed)
        return [[{names.get(n, n): args for n, args in call.items()} for call in turn] for turn in turns]


def _identity(tools: Sequence[ToolDef], seed: int) -> dict[str, str]:
    return {}


def _opaque_names(tools: Sequence[ToolDef], seed: int) -> dict[str, str]:
    order = sorted(str(t["name"]) for t in tools)
    random.Random(seed).shuffle(order)
    return {name: f"tool_{i + 1:02d}" for i, name in enumerate(order)}


def _hide_names(tools: Sequence[ToolDef], seed: int) -> list[dict[str, Any]]:
    names = _opaque_names(tools, seed)
    return [{**copy.deepcopy(dict(t)), "name": names[str(t["name"])]} for t in tools]


def _perturb(tools: Sequence[ToolDef], seed: int) -> list[dict[str, Any]]:
    out = []
    for t in tools:
        tool = copy.deepcopy(dict(t))
        tool["description"] = "Performs an operation with the given parameters."
        params = tool.get("parameters")
        if isinstance(params, dict):
            for prop in params.get("properties", {}).values():
                if isinstance(prop, dict) and "description" in prop:
                    prop["description"] = "A parameter."
        out.append(tool)
    return out


def _strip_enums(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_enums(v) for k, v in node.items() if k != "enum"}
    if isinstance(node, list):
        return [_strip_enums(v) for v in node]
    return node


def _drop_enums(tools: Sequence[ToolDef], seed: int) -> list[dict[str, Any]]:
    return [_strip_enums(copy.deepcopy(dict(t))) for t in tools]


def _near_names(name: str, rng: random.Random) -> list[str]:
    parts = re.split(r"([._])", name)
    words = parts[::2]
    decoys = [f"{name}_v2", f"{name}s" if not name.endswith("s") else name[:-1]]
    if len(words) > 1:
        swapped = list(words)
        swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
        seps = [*parts[1::2], ""]
        decoys.append("".join(w + s for w, s in zip(swapped, seps, strict=False)))
    if len(name) > 4:
        i = rng.randrange(1, len(name) - 1)
        decoys.append(name[:i] + name[i + 1] + name[i] + name[i + 2 :])
    return [d for d in dict.fromkeys(decoys) if d != name]


def _widen(tools: Sequence[ToolDef], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    taken = {str(t["name"]) for t in tools}
    out = [copy.deepcopy(dict(t)) for t in tools]
    for t in tools:
        for decoy in _near_names(str(t["name"]), rng)[:2]:
            if decoy in taken:
                continue
            taken.add(decoy)
            out.append(
                {**copy.deepcopy(dict(t)), "name": decoy, "description": f"Legacy variant of {t['name']}."}
            )
    rng.shuffle(out)
    return out


def _same(tools: Sequence[ToolDef], seed: int) -> list[dict[str, Any]]:
    return [copy.deepcopy(dict(t)) for t in tools]


ABLATIONS: dict[str, Ablation] = {
    "names_hidden": Ablation("names_hidden", _hide_names, _opaque_names),
    "descriptions_perturbed": Ablation("descriptions_perturbed", _perturb, _identity),
    "enums_dropped": Ablation("enums_dropped", _drop_enums, _identity),
    "candidates_widened": Ablation("candidates_widened", _widen, _identity),
    "feedback_bare": Ablation("feedback_bare", _same, _identity),
}


def feedback(observation: Mapping[str, Any], *, bare: bool = False) -> str:
    """What the policy is told after a call: the observation, or only ``error`` under ``feedback_bare``."""
    import json

    if bare and observation.get("status") == "error":
        return "error"
    return json.dumps(observation, default=str)[:4000]


@dataclass(frozen=True, slots=True)
class Counterfactual:
    """A request with one key fact changed, and the argument value that must follow it."""

    request: str
    tool: str
    argument: str
    original: Any
    changed: Any


def counterfactual(
    request: str, expected_turn: Sequence[Mapping[str, Any]], seed: int = 0
) -> Counterfactual | None:
    """Change one fact of ``request`` that an expected argument copies verbatim; None if there is none.

    Only arguments with a single acceptable value that appears once in the request (a number or a
    word of at least 3 letters) qualify; numbers become another number, words another word.
    """
    rng = random.Random(seed)
    for call in expected_turn:
        ((tool, args),) = call.items()
        for arg, options in args.items():
            values = [v for v in options if v != ""]
            if len(values) != 1:
                continue
            value = values[0]
            if isinstance(value, bool):
                continue
            if isinstance(value, int | float):
                text = str(value)
                changed: Any = (
                    value + rng.randint(2, 9) if isinstance(value, int) else round(value * 1.7 + 1, 3)
                )
                new_text = str(changed)
            elif isinstance(value, str) and len(value) >= 3 and value.replace(" ", "").isalpha():
                text = value
                changed = "Zanthor" if value.lower() != "zanthor" else "Quellan"
                new_text = changed
            else:
                continue
            pattern = re.compile(rf"(?<![\w.]){re.escape(text)}(?![\w.])")
            if len(pattern.findall(request)) != 1:
                continue
            return Counterfactual(pattern.sub(new_text, request), tool, arg, value, changed)
    return None
