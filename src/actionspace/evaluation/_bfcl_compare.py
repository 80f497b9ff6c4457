"""Our single-turn verdicts side by side with BFCL's own AST checker, and every disagreement explained.

BFCL's checker (``bfcl_eval.eval_checker.ast_eval.ast_checker.ast_checker``) is imported from the
pinned, sha256-verified wheel (a zip on ``sys.path``), exactly as shipped, and run in this process.

Its module imports one name from BFCL's model registry, ``MODEL_CONFIG_MAPPING``, and uses it in
one place: ``convert_func_name`` asks whether the model under test spells dotted function names with
underscores (OpenAI-style names). The registry module itself imports a handler class for every model
vendor BFCL supports, and with them those vendors' SDKs, which this package does not install. So,
unless a real registry is already imported, the checker gets a registry holding the one model
evaluated here, :data:`REFERENCE_MODEL`, which keeps dots (our calls carry the names as BFCL's docs
spell them). Nothing of the checker's own logic is replaced.

For the irrelevance categories BFCL runs no checker: its rule is "no call is correct", any
decodable call is wrong (``live_relevance``, which ships no possible answer: any call is correct).
"""

from __future__ import annotations

import sys
import threading
import types
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from actionspace.evaluation import _bfcl_data
from actionspace.evaluation._bfcl_mt_backends import _wheel
from actionspace.evaluation._parallel_eval import run_split
from actionspace.evaluation.judge import judge_turn
from actionspace.evaluation.outcomes import TaskOutcome
from actionspace.evaluation.suite import Suite
from actionspace.parse import parse

__all__ = [
    "REFERENCE_MODEL",
    "CheckerCase",
    "bfcl_reference",
    "compare_with_bfcl",
    "explain",
    "run_bfcl_checker",
]

REFERENCE_MODEL: Final = "actionspace-replay"
"""The model name the checker is told: registered as keeping dots in function names."""

_REGISTRY: Final = "bfcl_eval.constants.model_config"
_NEGATIVE: Final = ("irrelevance", "live_irrelevance")
_RELEVANCE: Final = ("live_relevance",)
_LANGUAGES: Final[Mapping[str, str]] = {"simple_java": "JAVA", "simple_javascript": "JAVASCRIPT"}
_lock = threading.Lock()


@dataclass(frozen=True, slots=True, kw_only=True)
class _RegistryEntry:
    """The one field of BFCL's ``ModelConfig`` the AST checker reads."""

    underscore_to_dot: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckerCase:
    """One task as BFCL's checker reads it."""

    functions: Sequence[Mapping[str, Any]]
    """BFCL's function docs of the task, as shipped."""
    output: Sequence[Mapping[str, Mapping[str, Any]]]
    """The model's calls as ``[{name: {argument: value}}]``."""
    answer: Sequence[Mapping[str, Any]]
    """BFCL's possible answer of the task."""
    category: str
    language: str = "PYTHON"
    """A member name of BFCL's ``Language`` enum."""


def _checker(cache_dir: Path | None) -> tuple[Callable[..., dict[str, Any]], Any]:
    """BFCL's ``ast_checker`` and its ``Language`` enum, imported from the pinned wheel."""
    with _lock:
        path = str(_wheel(cache_dir))
        if path not in sys.path and not any(m.startswith("bfcl_eval") for m in sys.modules):
            sys.path.append(path)
        if _REGISTRY not in sys.modules:
            registry = types.ModuleType(
                _REGISTRY, "The model evaluated here, as BFCL's AST checker reads it."
            )
            registry.MODEL_CONFIG_MAPPING = {REFERENCE_MODEL: _RegistryEntry()}  # type: ignore[attr-defined]
            sys.modules[_REGISTRY] = registry
        mapping = sys.modules[_REGISTRY].MODEL_CONFIG_MAPPING
        if REFERENCE_MODEL not in mapping:
            mapping[REFERENCE_MODEL] = _RegistryEntry()
        from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]
        from bfcl_eval.eval_checker.ast_eval.ast_checker import (  # type: ignore[import-not-found]
            ast_checker,
        )
    return ast_checker, Language


def _agentic_checker(cache_dir: Path | None) -> Callable[..., dict[str, Any]]:
    """BFCL's answer checker of the agentic categories (``memory``, ``web_search``)."""
    _checker(cache_dir)  # puts the wheel on the path
    from bfcl_eval.eval_checker.agentic_eval.agentic_checker import (  # type: ignore[import-not-found]
        agentic_checker,
    )

    checker: Callable[..., dict[str, Any]] = agentic_checker
    return checker


def run_bfcl_checker(
    cases: Sequence[CheckerCase], cache_dir: Path | None = None, *, workers: int = 1
) -> list[dict[str, Any]]:
    """BFCL's ``ast_checker`` on every case: ``{"valid", "error_type", "error"}`` in case order.

    An exception inside the checker is reported as ``error_type`` ``checker_exception:<type>``.
    With ``workers`` > 1, large case lists are split over forked processes (same verdicts).
    """
    if not cases:
        return []
    ast_checker, language = _checker(cache_dir)  # imported before any fork: workers inherit it

    def check(case: CheckerCase) -> dict[str, Any]:
        try:
            result = ast_checker(  # it reads its inputs and never edits them (2026.3.23), so no copies
                list(case.functions),
                list(case.output),
                list(case.answer),
                language[case.language],
                case.category,
                REFERENCE_MODEL,
            )
        except Exception as exc:  # the checker's own failure is a finding, not a crash
            return {
                "valid": False,
                "error_type": f"checker_exception:{type(exc).__name__}",
                "error": [repr(exc)],
            }
        return {
            "valid": bool(result["valid"]),
            "error_type": str(result.get("error_type", "")),
            "error": result.get("error", []),
        }

    split = run_split(cases, check, workers=workers) if workers > 1 else None
    return split if split is not None else [check(case) for case in cases]


def _bfcl_records(category: str, data: Path) -> dict[str, tuple[Any, Any]]:
    """``id -> (function docs, possible answer)`` as BFCL ships them."""
    answers: dict[str, Any] = {}
    answer_file = data / "possible_answer" / f"BFCL_v4_{category}.json"
    if answer_file.is_file():
        answers = {a["id"]: a["ground_truth"] for a in _bfcl_data._lines(answer_file)}
    return {
        r["id"]: (r["function"], answers.get(r["id"]))
        for r in _bfcl_data._lines(data / f"BFCL_v4_{category}.json")
    }


def compare_with_bfcl(
    suite: Suite, outcomes: Sequence[TaskOutcome], *, cache_dir: Path | None = None
) -> list[dict[str, Any]]:
    """Every single-turn BFCL task where BFCL's verdict and ours differ.

    Compared: baseline outcomes of tasks whose origin is ``bfcl:<category>`` (not multi-turn) that
    parsed to at least one call, and every no-call task. Ours is the ``args`` layer (``select`` for
    no-call tasks). Each disagreement is ``{"task_id", "category", "ours", "bfcl", "bfcl_error",
    "ours_reason", "explanation"}``, in outcome order.
    """
    found: list[dict[str, Any]] = bfcl_reference(suite, outcomes, cache_dir=cache_dir)["disagreements"]
    return found


def bfcl_reference(
    suite: Suite, outcomes: Sequence[TaskOutcome], *, cache_dir: Path | None = None, workers: int = 1
) -> dict[str, Any]:
    """The comparison with BFCL's checker: ``{"disagreements": [...], "summary": {...}, "verdicts":
    {task id: BFCL's verdict}}``.

    The summary counts compared tasks, agreements, disagreements by explanation, and, where both
    reject, BFCL's error types beside our diagnosis (the first failing layer and the runtime's error
    category): BFCL's parallel checker says ``cannot_find_match`` where we name the layer and cause.
    """
    rows = _compared(suite, outcomes, cache_dir, workers)
    disagreements: list[dict[str, Any]] = []
    both_bfcl: Counter[str] = Counter()
    both_ours: Counter[str] = Counter()
    for row in rows:
        calls, diagnosis = row.pop("_calls"), row.pop("_diagnosis")
        if row["ours"] != row["bfcl"]:
            row["explanation"] = explain(row, calls)
            disagreements.append(row)
        elif row["ours"] is False:
            both_bfcl[str(row["bfcl_error"]).split(":", 2)[:2][-1] or "rejected"] += 1
            both_ours[diagnosis] += 1
    summary = {
        "checker": f"bfcl-eval {_bfcl_data.BFCL_VERSION} (ast_checker, agentic_checker)",
        "compared": len(rows),
        "agree": len(rows) - len(disagreements),
        "disagree": len(disagreements),
        "by_explanation": dict(Counter(d["explanation"] for d in disagreements).most_common()),
        "both_reject": {"bfcl": dict(both_bfcl.most_common()), "ours": dict(both_ours.most_common())},
    }
    verdicts = {str(row["task_id"]): bool(row["bfcl"]) for row in rows if row["bfcl"] is not None}
    return {"disagreements": disagreements, "summary": summary, "verdicts": verdicts}


def _diagnosis(outcome: TaskOutcome) -> str:
    """The first failing layer and the runtime's error category, e.g. ``args:invalid_arguments``."""
    for layer in ("parse", "select", "args", "exec"):
        if outcome.layer(layer) is False:
            category = next((s.error_category for s in outcome.steps if s.error_category), None)
            return f"{layer}:{category}" if category else layer
    return "ok"


def _compared(
    suite: Suite, outcomes: Sequence[TaskOutcome], cache_dir: Path | None, workers: int = 1
) -> list[dict[str, Any]]:
    """One row per compared task, BFCL's verdict filled in."""
    data = _bfcl_data.fetch(cache_dir)
    records: dict[str, dict[str, tuple[Any, Any]]] = {}
    rows: list[dict[str, Any]] = []
    cases: list[CheckerCase] = []
    checked: list[int] = []
    for outcome in outcomes:
        if outcome.variant != "baseline" or len(outcome.steps) != 1:
            continue
        task = suite.task(outcome.task_id)
        category = task.origin.removeprefix("bfcl:")
        if not task.origin.startswith("bfcl:") or category.startswith("multi_turn") or task.turns != 1:
            continue
        step = outcome.steps[0]
        calls: list[dict[str, Any]] = [{str(c.get("name")): c.get("arguments")} for c in step.calls]
        diagnosis = _diagnosis(outcome)
        if task.no_call:
            bfcl = not (calls and step.parse_ok)
            error = "" if bfcl else "irrelevance_error:decoder_success"
            ours = outcome.layer("select") is True
            rows.append(_row(task.id, category, ours, bfcl, error, "", calls, diagnosis))
            continue
        if task.answers:  # agentic: BFCL checks the reply's text only
            text = parse(step.raw).content or "" if step.raw is not None else ""
            bfcl_ok = bool(_agentic_checker(cache_dir)(text, list(task.answers))["valid"])
            ours = outcome.layer("task") is True
            error = "" if bfcl_ok else "agentic:answer_not_found"
            rows.append(_row(task.id, category, ours, bfcl_ok, error, "", calls, diagnosis))
            continue
        if not calls:
            continue
        if category in _RELEVANCE:  # no possible answer: any call is right
            rows.append(
                _row(task.id, category, outcome.layer("args") is True, True, "", "", calls, diagnosis)
            )
            continue
        if category not in records:
            records[category] = _bfcl_records(category, data)
        functions, answer = records[category][task.id]
        verdict = judge_turn([dict(c) for c in step.calls], task.possible_answers(0))
        ours = outcome.layer("args") is True
        rows.append(_row(task.id, category, ours, None, "", verdict.reason, calls, diagnosis))
        checked.append(len(rows) - 1)
        cases.append(
            CheckerCase(
                functions=functions,
                output=calls,
                answer=answer,
                category=category,
                language=_LANGUAGES.get(category, "PYTHON"),
            )
        )
    for index, result in zip(checked, run_bfcl_checker(cases, cache_dir, workers=workers), strict=True):
        rows[index]["bfcl"] = bool(result["valid"])
        rows[index]["bfcl_error"] = _error_text(result)
    return rows


def _row(
    task_id: str,
    category: str,
    ours: bool,
    bfcl: bool | None,
    error: str,
    reason: str,
    calls: Any,
    diagnosis: str,
) -> dict[str, Any]:
    return {
        "task_id": task_id,
        "category": category,
        "ours": ours,
        "bfcl": bfcl,
        "bfcl_error": error,
        "ours_reason": reason,
        "_calls": calls,
        "_diagnosis": diagnosis,
    }


def _innermost(error: Any) -> list[tuple[str, str]]:
    """(error type, message) of the per-call errors nested in a ``cannot_find_match``."""
    found: list[tuple[str, str]] = []
    if isinstance(error, list):
        for item in error:
            found.extend(_innermost(item))
    elif isinstance(error, Mapping):
        if "sub_error_type" in error:
            found.append((str(error["sub_error_type"]), " ".join(map(str, error.get("sub_error", [])))))
        else:
            for value in error.values():
                found.extend(_innermost(value))
    return found


def _error_text(result: Mapping[str, Any]) -> str:
    """``error_type: first message`` (for a parallel mismatch, the per-call errors as well)."""
    kind = str(result.get("error_type", ""))
    errors = result.get("error") or []
    head = next((e for e in errors if isinstance(e, str)), "")
    inner = _innermost(errors)
    text = f"{kind}: {head}" if head else kind
    if inner:
        text += " | " + "; ".join(f"{k}: {m}" for k, m in inner[:3])
    return text


_BFCL_REASONS: Final = (
    ("checker_exception", "BFCL's checker raised an exception"),
    ("missing_required", "required in BFCL's function doc, optional in its possible answer"),
    ("dict_", "nested answer: BFCL reads a dict's values as lists of options"),
    ("list_dict", "nested answer: BFCL reads a dict's values as lists of options"),
    ("type_error:java", "Java/JavaScript: BFCL wants every value as source text"),
    ("type_error:js", "Java/JavaScript: BFCL wants every value as source text"),
    ("type_error", "type strictness"),
    ("missing_optional", "optional argument"),
    ("unexpected_param", "argument absent from BFCL's doc or possible answer"),
    ("value_error:string", "string normalisation"),
    ("value_error:list", "list comparison"),
    ("value_error:others", "value comparison"),
    ("wrong_func_name", "function name"),
    ("wrong_count", "number of calls"),
)
"""BFCL error types (substrings) and what they mean when only BFCL rejects; first match wins."""


def explain(row: Mapping[str, Any], calls: Any = None) -> str:
    """A short class for one disagreement, from BFCL's error text and our judge's reason."""
    error = str(row.get("bfcl_error", ""))
    if row.get("category") in _NEGATIVE:
        if not calls:
            return "BFCL counts output that does not parse as no call"
        return "no-call rule: a parsed call our pipeline does not count"
    if row.get("category") in _RELEVANCE:
        return "relevance rule: BFCL accepts any call"
    if row.get("bfcl") is False:
        if "cannot_find_match" in error and " | " not in error:
            return "BFCL only says cannot_find_match"
        for needle, meaning in _BFCL_REASONS:
            if needle in error:
                if meaning == "type strictness" and ("got int" in error or "got float" in error):
                    return "type coercion int/float"
                return meaning
        return "BFCL rejects: " + error.split(":", 1)[0]
    reason = str(row.get("ours_reason", ""))
    if "is not one of" in reason:
        return "our value comparison is stricter"
    if "missing argument" in reason:
        return "optional argument"
    if "unexpected argument" in reason:
        return "argument absent from the possible answer"
    return "our judge rejects: " + (reason or "no reason recorded")
