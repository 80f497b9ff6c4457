"""The cited corpus of real raw outputs: every family ≥ 95 % exact, and no call ever guessed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from actionspace.evaluation.parse_corpus import MIN_EXACT, load_corpus, score_case, score_corpus

CORPUS_DIR = Path(__file__).parent / "corpus"
CORPUS = load_corpus(CORPUS_DIR)
ISSUE_FAMILIES = {
    "gemma4",
    "deepseek",
    "kimi_k2",
    "harmony",
    "llama4_pythonic",
    "qwen3_coder",
    "mistral",
    "glm",
}


def test_the_corpus_covers_every_family_named_in_the_parsing_issue() -> None:
    assert set(CORPUS) >= ISSUE_FAMILIES
    assert all(len(CORPUS[family]) >= 10 for family in ISSUE_FAMILIES)


@pytest.mark.parametrize("family", sorted(CORPUS))
def test_each_family_parses_at_least_95_percent_of_its_corpus_exactly(family: str) -> None:
    scores = [score_case(family, case) for case in CORPUS[family]]
    missed = [s.case_id for s in scores if not s.exact]
    assert sum(s.exact for s in scores) / len(scores) >= MIN_EXACT, missed


@pytest.mark.parametrize("family", sorted(CORPUS))
def test_no_corpus_output_yields_a_call_its_fixture_does_not_expect(family: str) -> None:
    guessed = [
        (s.case_id, s.result.calls) for s in (score_case(family, c) for c in CORPUS[family]) if s.guessed
    ]
    assert guessed == []


def test_every_fixture_cites_where_it_came_from_and_the_readme_lists_every_file() -> None:
    readme = (CORPUS_DIR / "README.md").read_text(encoding="utf-8")
    for family, cases in CORPUS.items():
        assert f"{family}.json" in readme
        for case in cases:
            assert case["source"].strip(), (family, case["id"])
    ids = [(family, case["id"]) for family, cases in CORPUS.items() for case in cases]
    assert len(ids) == len(set(ids))


def test_the_corpus_holds_truncated_outputs_and_markers_inside_arguments() -> None:
    cases = [case for cases in CORPUS.values() for case in cases]
    assert sum(1 for c in cases if c.get("error") in ("truncated", "unterminated_block")) >= 8
    assert sum(1 for c in cases if "marker_inside" in c["id"]) >= 5


def test_a_family_below_the_bar_or_a_guessed_call_fails_the_score() -> None:
    wrong = {
        "x": [
            {
                "id": "a",
                "source": "s",
                "raw": '<tool_call>{"name": "f", "arguments": {}}</tool_call>',
                "calls": [],
            }
        ]
    }
    (row,) = score_corpus(wrong)
    assert (row.exact, row.guessed) == (0, 1)


def test_eval_parse_prints_the_per_family_table_and_succeeds() -> None:
    from actionspace.cli import app

    result = CliRunner().invoke(app, ["eval", "parse", "--corpus", str(CORPUS_DIR)], terminal_width=120)
    assert result.exit_code == 0, result.output
    for family in ISSUE_FAMILIES:
        assert family in result.output
    assert "100.0" in result.output


def test_eval_parse_exits_nonzero_when_a_family_falls_below_the_bar(tmp_path: Path) -> None:
    from actionspace.cli import app

    (tmp_path / "bad.json").write_text(
        '{"family": "bad", "cases": [{"id": "a", "source": "s", "raw": "[TOOL_CALLS]f{}", "calls": []}]}',
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["eval", "parse", "--corpus", str(tmp_path)], terminal_width=120)
    assert result.exit_code == 1
