"""Judging one turn against its ground truth: the ``select`` and ``args`` layers.

Ground truth follows BFCL's "possible answer" shape: a turn is a list of expected calls, each
``{tool name: {argument: [acceptable values...]}}``; ``""`` among the acceptable values means the
argument may be left out. A turn passes ``select`` when the multiset of called tool names equals
the expected one, and ``args`` when the calls can be paired one-to-one with expected calls so that
every argument of every call is acceptable (a perfect matching, so parallel calls may come in any
order). Strings compare after normalisation: case, surrounding spaces and the separators
`` ,./-_*^`` are ignored; numbers compare by value (``5 == 5.0``); lists element-wise; objects by key.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Expected",
    "TurnVerdict",
    "acceptable",
    "answer_found",
    "first_acceptable",
    "ground_truth_arguments",
    "judge_turn",
]

Expected = Mapping[str, Any]
"""One expected call: ``{name: {argument: [acceptable values]}}``."""

_SEPARATORS = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True, slots=True)
class TurnVerdict:
    """How one turn's calls compare with the expected calls."""

    select_ok: bool
    args_ok: bool
    reason: str = ""
    """Why a layer failed (empty when both passed)."""
    pairs: tuple[tuple[str, str], ...] = ()
    """(expected tool, chosen tool) pairs for the confusion matrix (``<none>`` for a missing side)."""


_ANSWER_IGNORED = re.compile(r"[,./\-_*^()]")


def answer_found(text: str, answers: Sequence[str]) -> bool:
    """Does ``text`` contain one of ``answers`` as whole words, ignoring case, the characters
    ``,./-_*^()`` and quote style? ("April 1, 2024" matches "april 1 2024"; spaces still count.)"""

    def norm(value: str) -> str:
        return _ANSWER_IGNORED.sub("", value).lower().replace("'", '"')

    said = norm(text)
    return any(re.search(rf"\b{re.escape(norm(a))}\b", said) for a in answers if a)


def _norm_str(value: str) -> str:
    return _SEPARATORS.sub("", value.strip().lower()).replace("'", '"')


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, str) and isinstance(b, str):
        return _norm_str(a) == _norm_str(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _nested(option: Any) -> bool:
    """BFCL writes an object-valued answer as ``{key: [acceptable values]}``, nested option lists."""
    return isinstance(option, Mapping) and bool(option) and all(isinstance(v, list) for v in option.values())


def _fits_nested(value: Any, option: Mapping[str, Any]) -> bool:
    if not isinstance(value, Mapping):
        return False
    if set(value) - set(option):
        return False
    for key, choices in option.items():
        if key not in value:
            if "" not in choices:
                return False
        elif not acceptable(value[key], choices):
            return False
    return True


def acceptable(value: Any, options: Sequence[Any]) -> bool:
    """Is ``value`` one of the acceptable ``options``? (An object option may nest option lists.)

    ``""`` among the options also accepts the empty string itself, as BFCL's checker does.
    """
    if value == "" and "" in options:
        return True
    return any(
        _same(value, option) or (_nested(option) and _fits_nested(value, option))
        for option in options
        if option != ""
    )


def ground_truth_arguments(
    spec: Mapping[str, Sequence[Any]], required: Collection[str] = ()
) -> dict[str, Any]:
    """The arguments of a ground-truth call: the first acceptable value of each argument.

    Arguments that may be left out (``""`` among their options) are left out, unless the tool
    requires them and ``""`` is their only option: then the empty string is the value (BFCL's
    multi-turn answers write a literal ``''`` that way).
    """
    out: dict[str, Any] = {}
    for arg, values in spec.items():
        if not values:
            continue
        if "" in values:
            if arg in required and all(v == "" for v in values):
                out[arg] = ""
            continue
        out[arg] = first_acceptable(values)
    return out


def first_acceptable(options: Sequence[Any]) -> Any:
    """A value that fits ``options``: the first one, with nested option lists resolved the same way."""
    option = next(o for o in options if o != "")
    if _nested(option):
        return {k: first_acceptable(v) for k, v in option.items() if v and "" not in v}
    return option


def _call_fits(name: str, arguments: Mapping[str, Any], expected: Expected) -> str | None:
    """None when the call fits ``expected``; otherwise why not."""
    ((want, spec),) = expected.items()
    if name != want:
        return f"{name} instead of {want}"
    extra = sorted(set(arguments) - set(spec))
    if extra:
        return f"{name}: unexpected argument(s) {extra}"
    for arg, options in spec.items():
        if arg not in arguments:
            if "" not in options:
                return f"{name}: missing argument {arg!r}"
            continue
        if not acceptable(arguments[arg], options):
            return f"{name}: {arg}={arguments[arg]!r} is not one of {list(options)[:5]}"
    return None


def judge_turn(calls: Sequence[Mapping[str, Any]], expected: Sequence[Expected]) -> TurnVerdict:
    """Compare a turn's parsed calls (``{"name", "arguments"}``) with its expected calls."""
    names = Counter(str(c.get("name", "")) for c in calls)
    wanted = Counter(next(iter(e)) for e in expected)
    pairs = _pairs(names, wanted)
    if names != wanted:
        missing = sorted((wanted - names).elements())
        extra = sorted((names - wanted).elements())
        why = "; ".join(
            part
            for part in (f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else "")
            if part
        )
        return TurnVerdict(False, False, why, pairs)
    reasons: list[str] = []
    if _matching(calls, expected, 0, set(), reasons):
        return TurnVerdict(True, True, "", pairs)
    return TurnVerdict(True, False, reasons[0] if reasons else "no pairing of calls fits", pairs)


def _matching(
    calls: Sequence[Mapping[str, Any]],
    expected: Sequence[Expected],
    i: int,
    used: set[int],
    reasons: list[str],
) -> bool:
    """Backtracking perfect matching (turns hold a handful of calls)."""
    if i == len(calls):
        return True
    call = calls[i]
    arguments = call.get("arguments") or {}
    if not isinstance(arguments, Mapping):
        reasons.append(f"{call.get('name')}: arguments are not an object")
        return False
    for j, want in enumerate(expected):
        if j in used:
            continue
        why = _call_fits(str(call.get("name", "")), arguments, want)
        if why is not None:
            reasons.append(why)
            continue
        used.add(j)
        if _matching(calls, expected, i + 1, used, reasons):
            return True
        used.discard(j)
    return False


def _pairs(chosen: Counter[str], wanted: Counter[str]) -> tuple[tuple[str, str], ...]:
    """Pair expected with chosen names: equal names first, then the leftovers in order."""
    out: list[tuple[str, str]] = []
    left_chosen, left_wanted = Counter(chosen), Counter(wanted)
    for name in sorted(set(chosen) & set(wanted)):
        n = min(chosen[name], wanted[name])
        out.extend([(name, name)] * n)
        left_chosen[name] -= n
        left_wanted[name] -= n
    rest_c = sorted(left_chosen.elements())
    rest_w = sorted(left_wanted.elements())
    for k in range(max(len(rest_c), len(rest_w))):
        out.append((rest_w[k] if k < len(rest_w) else "<none>", rest_c[k] if k < len(rest_c) else "<none>"))
    return tuple(out)
