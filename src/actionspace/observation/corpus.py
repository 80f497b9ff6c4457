"""How many decision-relevant facts each trimming rule keeps (DESIGN §5).

``build_corpus(seed)`` generates, deterministically, command logs (errors buried in 50k lines,
tracebacks, exit codes), search outputs (a vendored file with thousands of matches before the
definition, context lines, API records with duplicates) and HTML pages (inline scripts and
navigation before the form), each with the facts a decision needs. ``evaluate_rules`` shapes
every case with its rule and, for comparison, with ``head_baseline``: the same output cut to its
first characters (or first records) within the same byte budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from actionspace._canonical import json_size
from actionspace.observation._corpus_cases import Case, Fact, log_cases
from actionspace.observation._corpus_web import search_cases, web_cases
from actionspace.observation._shape import shape

__all__ = ["Case", "CaseResult", "Fact", "build_corpus", "evaluate_cases", "evaluate_rules", "head_baseline"]

_TEXT_KEYS = ("output", "stdout", "html", "content", "body", "text")
_LIST_KEYS = ("hits", "results", "matches", "items")


def build_corpus(seed: int = 0) -> list[Case]:
    """Every case: 11 logs, 7 search outputs, 6 pages."""
    return [*log_cases(seed), *search_cases(seed), *web_cases(seed)]


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """Facts of one case kept by its rule and by the baseline."""

    name: str
    rule: str
    facts: int
    kept: tuple[Fact, ...]
    baseline_kept: tuple[Fact, ...]
    kept_bytes: int


def head_baseline(value: object, max_bytes: int) -> Any:
    """``value`` cut naively to ``max_bytes``: its text to the first characters, a list of records
    to the first records; small sibling fields (an exit code) are kept as they are."""
    if isinstance(value, Mapping):
        key = next((k for k in _TEXT_KEYS if k in value), None)
        if key is not None:
            return _longest(dict(value), key, _text(value[key]), max_bytes)
        key = next((k for k in _LIST_KEYS if isinstance(value.get(k), list)), None)
        if key is not None:
            return _longest(dict(value), key, value[key], max_bytes)
    if isinstance(value, list):
        return _longest(None, "", value, max_bytes)
    return _longest(None, "", _text(value), max_bytes)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Iterable):
        parts = list(value)
        if all(isinstance(p, bytes) for p in parts):
            return b"".join(parts).decode("utf-8", "replace")
        return "".join(str(p) for p in parts)
    return str(value)


def _longest(envelope: dict[str, Any] | None, key: str, body: str | list[Any], max_bytes: int) -> Any:
    """``envelope`` with ``body[:n]`` under ``key`` (or ``body[:n]`` alone), for the largest ``n``
    that fits ``max_bytes``."""

    def cut(n: int) -> Any:
        return body[:n] if envelope is None else {**envelope, key: body[:n]}

    low, high, best = 0, len(body), cut(0)
    while low <= high:
        mid = (low + high) // 2
        candidate = cut(mid)
        if json_size(candidate) <= max_bytes:
            best, low = candidate, mid + 1
        else:
            high = mid - 1
    return best


def evaluate_cases(seed: int = 0, max_bytes: int = 16_384) -> list[CaseResult]:
    """Each case shaped by its rule and by ``head_baseline``, with the facts each kept."""
    results = []
    for case in build_corpus(seed):
        shaped = shape(case.build(), rule=case.rule, max_bytes=max_bytes)
        baseline = head_baseline(case.build(), max_bytes)
        results.append(
            CaseResult(
                name=case.name,
                rule=case.rule,
                facts=len(case.facts),
                kept=tuple(f for f in case.facts if f.kept_in(shaped.data)),
                baseline_kept=tuple(f for f in case.facts if f.kept_in(baseline)),
                kept_bytes=shaped.trimming.kept_bytes if shaped.trimming else json_size(shaped.data),
            )
        )
    return results


def evaluate_rules(seed: int = 0, max_bytes: int = 16_384) -> dict[str, dict[str, float]]:
    """Per rule: ``cases``, ``facts``, ``kept``, ``rate``, ``baseline_kept``, ``baseline_rate``."""
    report: dict[str, dict[str, float]] = {}
    for result in evaluate_cases(seed, max_bytes):
        row = report.setdefault(result.rule, {"cases": 0, "facts": 0, "kept": 0, "baseline_kept": 0})
        row["cases"] += 1
        row["facts"] += result.facts
        row["kept"] += len(result.kept)
        row["baseline_kept"] += len(result.baseline_kept)
    for row in report.values():
        row["rate"] = row["kept"] / row["facts"]
        row["baseline_rate"] = row["baseline_kept"] / row["facts"]
    return report
