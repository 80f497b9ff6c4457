from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

from actionspace.observation import canonical_bytes
from actionspace.observation.corpus import build_corpus, evaluate_cases, evaluate_rules, head_baseline


def digest(value: object) -> str:
    """sha256 over everything a tool result carries: text, bytes, records, streamed chunks."""
    hasher = hashlib.sha256()

    def feed(item: object) -> None:
        if isinstance(item, str | int):
            hasher.update(str(item).encode())
        elif isinstance(item, bytes):
            hasher.update(item)
        elif isinstance(item, dict):
            for key, inner in item.items():
                feed(key)
                feed(inner)
        elif isinstance(item, Iterable):
            for inner in item:
                feed(inner)

    feed(value)
    return hasher.hexdigest()


def test_the_corpus_has_at_least_twenty_cases_of_each_kind_of_output() -> None:
    cases = build_corpus()
    assert len(cases) >= 20
    assert Counter(case.rule for case in cases) == {"log-v1": 11, "search-v1": 7, "web-v1": 6}
    assert all(case.facts for case in cases)
    assert len({case.name for case in cases}) == len(cases)


def test_the_corpus_is_the_same_for_the_same_seed() -> None:
    first, second, other = build_corpus(7), build_corpus(7), build_corpus(8)
    for a, b in zip(first, second, strict=True):
        assert digest(a.build()) == digest(b.build())
        assert a.facts == b.facts
    assert any(digest(a.build()) != digest(c.build()) for a, c in zip(first, other, strict=True))


def test_every_fact_survives_its_rule_while_head_truncation_loses_most() -> None:
    report = evaluate_rules()
    print(report)
    assert set(report) == {"log-v1", "search-v1", "web-v1"}
    for rule, row in report.items():
        assert row["kept"] == row["facts"], rule
        assert row["rate"] == 1.0
        assert row["baseline_kept"] <= row["facts"] / 2, rule
        assert row["baseline_rate"] < row["rate"] - 0.5, rule


def test_every_case_is_shaped_within_its_budget_and_misses_nothing() -> None:
    for result in evaluate_cases(max_bytes=16_384):
        assert result.kept_bytes <= 16_384, result.name
        assert len(result.kept) == result.facts, result.name


def test_the_baseline_is_held_to_the_same_budget() -> None:
    output = {"exit_code": 2, "output": "x" * 100_000}
    baseline = head_baseline(output, 1024)
    assert baseline["exit_code"] == 2
    assert len(canonical_bytes(baseline)) <= 1024
    assert len(canonical_bytes({**output, "output": "x" * (len(baseline["output"]) + 1)})) > 1024
