"""``actionspace eval parse``: the raw-output corpus through :func:`actionspace.parse.parse`, per family.

The corpus is one JSON file per model family (``tests/parse/corpus/*.json`` in a checkout; its
README cites where each output was taken from). A case holds the model's ``raw`` text, the
expected ``calls`` (name and arguments, in order), optional ``tools`` to type arguments by, and
``error``: absent when the output must parse cleanly, a ``parse_error`` reason it must report, or
``"any"``. A case is *exact* when the calls match and the error expectation holds; a *guessed*
call is one the parser returned that the case does not expect.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from actionspace.errors import ConfigurationError
from actionspace.parse import ParseResult, parse

__all__ = [
    "CaseScore",
    "FamilyScore",
    "default_corpus_dir",
    "eval_parse_command",
    "load_corpus",
    "score_case",
    "score_corpus",
]

MIN_EXACT = 0.95


def default_corpus_dir() -> Path:
    """``tests/parse/corpus`` of the checkout this module runs from, else of the working directory."""
    checkout = Path(__file__).resolve().parents[3] / "tests" / "parse" / "corpus"
    return checkout if checkout.is_dir() else Path.cwd() / "tests" / "parse" / "corpus"


def load_corpus(directory: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Family name → its cases, from every ``*.json`` file in ``directory`` (sorted by name).

    Raises ConfigurationError naming the file that cannot be read or is not a corpus file.
    """
    root = directory or default_corpus_dir()
    corpus: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(root.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise ConfigurationError(f"{path}: not JSON or unreadable: {exc}") from exc
        cases = data.get("cases") if isinstance(data, dict) else None
        if not isinstance(data, dict) or "family" not in data:
            raise ConfigurationError(f"{path}: not a corpus file (an object with a family and its cases)")
        if not isinstance(cases, list) or not all(_is_case(c) for c in cases):
            raise ConfigurationError(
                f"{path}: cases must be a list of objects with an id, raw text and calls"
            )
        corpus[str(data["family"])] = cases
    return corpus


def _is_case(case: object) -> bool:
    if not isinstance(case, dict) or "id" not in case or not isinstance(case.get("raw"), str):
        return False
    calls = case.get("calls")
    return isinstance(calls, list) and all(
        isinstance(c, dict) and "name" in c and "arguments" in c for c in calls
    )


@dataclass(frozen=True, kw_only=True)
class CaseScore:
    """How one case fared."""

    family: str
    case_id: str
    exact: bool
    """Calls equal the expected calls and the error expectation holds."""
    guessed: int
    """Calls returned that the case does not expect."""
    result: ParseResult


@dataclass(frozen=True, kw_only=True)
class FamilyScore:
    """One row of the table."""

    family: str
    cases: int
    exact: int
    guessed: int

    @property
    def rate(self) -> float:
        return self.exact / self.cases if self.cases else 0.0


def _key(name: str, arguments: object) -> str:
    return json.dumps([name, arguments], sort_keys=True, ensure_ascii=False)


def _error_holds(expected: object, result: ParseResult) -> bool:
    if expected is None:
        return result.error is None
    if result.error is None or result.error.category != "parse_error":
        return False
    return expected == "any" or result.error.details.get("reason") == expected


def score_case(family: str, case: Mapping[str, Any]) -> CaseScore:
    """Parse one case's raw text and compare it with what the case expects."""
    result = parse(case["raw"], tools=case.get("tools"))
    got = [_key(c.name, c.arguments) for c in result.calls]
    want = [_key(c["name"], c["arguments"]) for c in case["calls"]]
    guessed = sum((Counter(got) - Counter(want)).values())
    exact = got == want and _error_holds(case.get("error"), result)
    return CaseScore(family=family, case_id=str(case["id"]), exact=exact, guessed=guessed, result=result)


def score_corpus(corpus: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[FamilyScore]:
    """One row per family: cases, exact cases, guessed calls."""
    rows: list[FamilyScore] = []
    for family, cases in corpus.items():
        scores = [score_case(family, case) for case in cases]
        rows.append(
            FamilyScore(
                family=family,
                cases=len(scores),
                exact=sum(s.exact for s in scores),
                guessed=sum(s.guessed for s in scores),
            )
        )
    return rows


def eval_parse_command(
    corpus: Annotated[
        Path | None,
        typer.Option(help="Directory of corpus JSON files (default: tests/parse/corpus of the checkout)."),
    ] = None,
    show_failures: Annotated[bool, typer.Option(help="List every case that is not exact.")] = False,
) -> None:
    """Parse every raw model output of the corpus and print, per family, exact cases and guessed calls.

    Exits 1 when a family is below 95 % exact or any call was guessed, or the corpus cannot be read;
    2 when there is no corpus to read (a wheel install has none: give --corpus PATH).
    """
    from rich.console import Console
    from rich.table import Table

    from actionspace._cli_tables import fail, one_line

    if corpus is None and not any(default_corpus_dir().glob("*.json")):  # a wheel ships no corpus
        where = "tests/parse/corpus of an actionspace source checkout (its README cites each source)"
        typer.echo(one_line(f"no parse corpus here: point --corpus PATH at one, e.g. {where}"), err=True)
        raise typer.Exit(2)
    try:
        loaded = load_corpus(corpus)
    except ConfigurationError as exc:
        fail(str(exc))
    if not loaded:
        fail(f"no corpus files found in {corpus or default_corpus_dir()}")
    console = Console()
    rows = score_corpus(loaded)
    table = Table(title="Raw model outputs parsed exactly, per family")
    for column in ("family", "cases", "exact", "exact %", "guessed calls"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for row in rows:
        table.add_row(row.family, str(row.cases), str(row.exact), f"{100 * row.rate:.1f}", str(row.guessed))
    total = FamilyScore(
        family="all",
        cases=sum(r.cases for r in rows),
        exact=sum(r.exact for r in rows),
        guessed=sum(r.guessed for r in rows),
    )
    table.add_row(
        total.family, str(total.cases), str(total.exact), f"{100 * total.rate:.1f}", str(total.guessed)
    )
    console.print(table)
    if show_failures:
        for family, cases in loaded.items():
            for case in cases:
                score = score_case(family, case)
                if not score.exact:
                    calls = [(c.name, c.arguments) for c in score.result.calls]
                    error = score.result.error.message if score.result.error else None
                    console.print(f"{family}/{score.case_id}: calls={calls!r} error={error!r}")
    if any(r.rate < MIN_EXACT or r.guessed for r in rows):
        raise typer.Exit(code=1)
