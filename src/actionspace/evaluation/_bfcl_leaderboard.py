"""Figures by BFCL's own categories and its overall accuracy, ours beside BFCL's checker's.

The leaderboard of bfcl-eval 2026.3.23 (``bfcl_eval/eval_checker/eval_runner_helper.py``,
``generate_leaderboard_csv``) builds its overall accuracy from per-category accuracies like this
(unweighted = plain mean of the parts; weighted = mean weighted by the parts' entry counts):

- non-live = unweighted(simple, multiple, parallel, parallel_multiple), where
  simple = unweighted(simple_python, simple_java, simple_javascript);
- live = weighted(live_simple, live_multiple, live_parallel, live_parallel_multiple);
- irrelevance = unweighted(irrelevance, live_irrelevance);
- multi-turn = unweighted(multi_turn_base, multi_turn_miss_func, multi_turn_miss_param,
  multi_turn_long_context);
- agentic = unweighted(web search, memory), web search = unweighted(web_search_base,
  web_search_no_snippet), memory = unweighted(memory_kv, memory_vector, memory_rec_sum);
- overall = 0.10·non-live + 0.10·live + 0.10·irrelevance + 0.30·multi-turn + 0.40·agentic
  (weights 10, 10, 10, 30, 40, normalised); ``live_relevance`` is shown but not in the overall.

A category that was not evaluated counts as 0 in that formula (BFCL's own rule), so ``overall``
is what BFCL would print for the same records; ``overall_evaluated`` leaves such categories out of
their means instead (our addition, for a partial run). Our suite plays ``memory`` with the
key-value backend and ``web_search`` with snippets: they stand for ``memory_kv`` and
``web_search_base``; ``memory_vector``, ``memory_rec_sum`` and ``web_search_no_snippet`` are
listed as not evaluated.

Per task, *ours* is the task layer (the full pipeline: parsed, selected, arguments accepted, run,
task judged), and *bfcl* is BFCL's checker on the same output: ``ast_checker`` for single-turn
categories, its irrelevance rule, ``agentic_checker`` for the agentic ones (see
:mod:`._bfcl_compare`), and for multi-turn its ``state_checker`` after every turn (what our
multi-turn runner already judges by). A single-turn output with no call fails BFCL's check (it
cannot be decoded into calls), except in the irrelevance categories.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, Final

from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_data import BFCL_VERSION
from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.suite import Suite

__all__ = [
    "FORMULA",
    "LEADERBOARD_CATEGORIES",
    "bfcl_leaderboard",
    "dataset_sizes",
    "leaderboard_html",
    "overall_accuracy",
]

LEADERBOARD_CATEGORIES: Final = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
    "web_search_base",
    "web_search_no_snippet",
    "memory_kv",
    "memory_vector",
    "memory_rec_sum",
)
"""BFCL's score categories, in the leaderboard's column order."""
_ALIASES: Final[Mapping[str, str]] = {"memory": "memory_kv", "web_search": "web_search_base"}
WEIGHTS: Final = {"non_live": 10, "live": 10, "irrelevance": 10, "multi_turn": 30, "agentic": 40}
FORMULA: Final = (
    f"bfcl-eval {BFCL_VERSION} generate_leaderboard_csv: overall = (10·non_live + 10·live + "
    "10·irrelevance + 30·multi_turn + 40·agentic) / 100; non_live = mean(mean(simple_python, simple_java, "
    "simple_javascript), multiple, parallel, parallel_multiple); live = count-weighted mean(live_simple, "
    "live_multiple, live_parallel, live_parallel_multiple); "
    "irrelevance = mean(irrelevance, live_irrelevance); "
    "multi_turn = mean(base, miss_func, miss_param, long_context); agentic = mean(mean(web_search_base, "
    "web_search_no_snippet), mean(memory_kv, memory_vector, memory_rec_sum)); not evaluated = 0"
)

Score = tuple[float, int]
"""(accuracy, entry count) of one category."""


def _unweighted(parts: Sequence[Score | None], skip_missing: bool) -> Score | None:
    present = [p for p in parts if p is not None]
    if skip_missing:
        if not present:
            return None
        return sum(a for a, _ in present) / len(present), sum(n for _, n in present)
    return sum(p[0] if p else 0.0 for p in parts) / len(parts), sum(n for _, n in present)


def _weighted(parts: Sequence[Score | None], skip_missing: bool) -> Score | None:
    present = [p for p in parts if p is not None]
    total = sum(n for _, n in present)
    if not present or total == 0:
        return None if skip_missing else (0.0, 0)
    return sum(a * n for a, n in present) / total, total


def dataset_sizes(data: Path) -> dict[str, int]:
    """Entries per leaderboard category in the BFCL data folder (what BFCL weighs a missing one by)."""
    files = {c: c for c in LEADERBOARD_CATEGORIES}
    files.update({c: "memory" for c in LEADERBOARD_CATEGORIES if c.startswith("memory_")})
    files.update({c: "web_search" for c in LEADERBOARD_CATEGORIES if c.startswith("web_search_")})
    sizes: dict[str, int] = {}
    for category, name in files.items():
        path = data / f"BFCL_v4_{name}.json"
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                sizes[category] = sum(1 for line in handle if line.strip())
    return sizes


def overall_accuracy(
    scores: Mapping[str, Score], *, sizes: Mapping[str, int] | None = None, skip_missing: bool = False
) -> dict[str, float | None]:
    """The groups and the overall figure of :data:`FORMULA` from per-category (accuracy, count).

    A category absent from ``scores`` counts as accuracy 0 over its ``sizes`` entries (BFCL's rule;
    the count only matters in the count-weighted live group) or, with ``skip_missing``, is left out
    of its group's mean (a group with nothing evaluated is then left out of the overall too).
    """
    s = skip_missing
    known = dict(sizes or {})

    def get(name: str) -> Score | None:
        if name in scores:
            return scores[name]
        return None if s else (0.0, known.get(name, 0))

    simple = _unweighted([get("simple_python"), get("simple_java"), get("simple_javascript")], s)
    groups = {
        "non_live": _unweighted([simple, get("multiple"), get("parallel"), get("parallel_multiple")], s),
        "live": _weighted(
            [get("live_simple"), get("live_multiple"), get("live_parallel"), get("live_parallel_multiple")], s
        ),
        "irrelevance": _unweighted([get("irrelevance"), get("live_irrelevance")], s),
        "multi_turn": _unweighted(
            [get(f"multi_turn_{k}") for k in ("base", "miss_func", "miss_param", "long_context")], s
        ),
        "agentic": _unweighted(
            [
                _unweighted([get("web_search_base"), get("web_search_no_snippet")], s),
                _unweighted([get("memory_kv"), get("memory_vector"), get("memory_rec_sum")], s),
            ],
            s,
        ),
    }
    present = {k: (WEIGHTS[k], v[0]) for k, v in groups.items() if v is not None}
    total = sum(w for w, _ in present.values())
    out: dict[str, float | None] = {k: (v[0] if v is not None else None) for k, v in groups.items()}
    out["simple"] = simple[0] if simple is not None else None
    out["overall"] = sum(w * a for w, a in present.values()) / total if total else None
    return out


def bfcl_leaderboard(
    suite: Suite, outcomes: Sequence[TaskOutcome], bfcl_verdicts: Mapping[str, bool]
) -> dict[str, Any]:
    """Per BFCL category: n, ours and BFCL's accuracy; the groups and overall of both.

    ``bfcl_verdicts`` maps task id → BFCL's checker's verdict (``bfcl_reference(...)["verdicts"]``);
    a BFCL task missing from it is judged by the rules in the module docstring.
    """
    tallies: dict[str, list[int]] = {}
    for outcome in outcomes:
        if outcome.variant != "baseline":
            continue
        task = suite.task(outcome.task_id)
        if not task.origin.startswith("bfcl:"):
            continue
        raw = task.origin.removeprefix("bfcl:")
        category = _ALIASES.get(raw, raw)
        ours = outcome.layer("task") is True
        if outcome.task_id in bfcl_verdicts:
            bfcl = bool(bfcl_verdicts[outcome.task_id])
        elif raw.startswith("multi_turn"):
            bfcl = bool(outcome.details.get("state_checks")) and all(outcome.details["state_checks"])
        else:
            bfcl = False  # no decodable call where BFCL needs one
        tally = tallies.setdefault(category, [0, 0, 0])
        tally[0] += 1
        tally[1] += ours
        tally[2] += bfcl
    sizes = dataset_sizes(_bfcl_data.fetch())
    ours_scores = {c: (t[1] / t[0], t[0]) for c, t in tallies.items()}
    bfcl_scores = {c: (t[2] / t[0], t[0]) for c, t in tallies.items()}
    categories = {
        c: {"n": tallies[c][0], "ours": ours_scores[c][0], "bfcl": bfcl_scores[c][0]}
        for c in LEADERBOARD_CATEGORIES
        if c in tallies
    }
    return {
        "version": BFCL_VERSION,
        "formula": FORMULA,
        "categories": categories,
        "not_evaluated": [c for c in LEADERBOARD_CATEGORIES if c not in tallies],
        "ours": overall_accuracy(ours_scores, sizes=sizes),
        "bfcl": overall_accuracy(bfcl_scores, sizes=sizes),
        "ours_evaluated": overall_accuracy(ours_scores, skip_missing=True),
        "bfcl_evaluated": overall_accuracy(bfcl_scores, skip_missing=True),
    }


def leaderboard_html(board: Mapping[str, Any] | None) -> str:
    """The table of :func:`bfcl_leaderboard` as an HTML fragment (empty without a board)."""
    if not isinstance(board, Mapping):
        return ""

    def pct(value: Any) -> str:
        return "—" if value is None else f"{100 * float(value):.2f} %"

    rows = [
        f"<tr><th>{escape(name)}</th><td>{row['n']}</td><td>{pct(row['ours'])}</td><td>{pct(row['bfcl'])}</td></tr>"
        for name, row in board["categories"].items()
    ]
    for group in ("non_live", "live", "irrelevance", "multi_turn", "agentic", "overall"):
        rows.append(
            f"<tr><th><b>{group}</b></th><td></td><td>{pct(board['ours'][group])}</td>"
            f"<td>{pct(board['bfcl'][group])}</td></tr>"
        )
    missing = ", ".join(board.get("not_evaluated") or ()) or "none"
    return (
        f"<h3>By BFCL's categories (bfcl-eval {escape(str(board['version']))})</h3>"
        f"<p>{escape(str(board['formula']))}. Not evaluated: {escape(missing)}.</p>"
        "<table class='bfcl-leaderboard'><thead><tr><th>category</th><th>n</th><th>ours</th>"
        "<th>BFCL's checker</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
