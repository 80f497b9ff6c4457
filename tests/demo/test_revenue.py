from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actionspace.demo.documents import DocumentStore
from actionspace.demo.revenue import RevenueReport, build_runtime, check_comparison, run_revenue
from actionspace.plan import Plan, PlanNode
from actionspace.types import Observation
from actionspace.validation.verdicts import Accepted, Rejected


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[RevenueReport, Path]:
    folder = tmp_path_factory.mktemp("revenue")
    return run_revenue(folder, store="memory://"), folder


def test_the_news_figure_is_rejected_then_the_official_comparison_is_accepted(
    ran: tuple[RevenueReport, Path],
) -> None:
    report, _ = ran
    assert [(s.plan, s.node, s.category) for s in report.steps] == [
        ("first", "search-a", None),
        ("first", "search-b", None),
        ("first", "compare", "invalid_arguments"),
        ("follow-up", "search-a", None),
        ("follow-up", "search-b", None),
        ("follow-up", "read-b", None),
        ("follow-up", "compare-official", None),
    ]
    rejection = report.steps[2].observation["error"]
    assert [f["path"] for f in rejection["field_errors"]] == ["/b"]
    assert "news summary" in rejection["field_errors"][0]["message"]
    assert rejection["details"]["read_instead"] == {"b": "pl-ar-2025"}
    assert report.plans == {"first": "partial", "follow-up": "ok"}
    assert report.passed, report.checks


def test_the_accepted_figures_are_the_official_reports_in_the_store(ran: tuple[RevenueReport, Path]) -> None:
    report, folder = ran
    comparison = report.comparison
    assert comparison is not None
    docs = DocumentStore(folder / "documents.db")
    try:
        for key, doc_id in (("a", "nw-ar-2025"), ("b", "pl-ar-2025")):
            side = comparison[key]
            doc = docs.document(doc_id)
            assert doc is not None and doc["kind"] == "annual_report"
            assert side["doc_id"] == doc_id and side["fiscal_year"] == doc["fiscal_year"] == 2025
            assert side["reported"] == {"amount": doc["revenue_m"], "currency": doc["currency"]}
        rate = docs.rate("USD", "EUR", 2025)
        assert rate is not None
        assert comparison["b"]["converted"] == {"amount": round(46812.0 * rate[0], 1), "currency": "EUR"}
        assert comparison["larger"] == "Pacific Loom Inc."
    finally:
        docs.close()
    assert json.loads(json.dumps(report.to_dict()))["passed"] is True


def _side(
    doc_id: str, *, source: str = "annual_report", year: int = 2025, currency: str = "EUR"
) -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "company": doc_id,
        "source": source,
        "publisher": "x",
        "fiscal_year": year,
        "summarises": None,
        "reported": {"amount": 10.0, "currency": currency},
        "converted": {"amount": 10.0 if currency == "EUR" else None, "currency": currency},
    }


def _comparison(a: dict[str, Any], b: dict[str, Any]) -> Observation:
    return Observation(call_id="c", tool="compare_revenue", data={"currency": "EUR", "a": a, "b": b})


def test_the_verifier_accepts_official_figures_of_one_year_in_one_currency() -> None:
    assert isinstance(check_comparison(_comparison(_side("a"), _side("b"))), Accepted)


def test_the_verifier_rejects_another_fiscal_year() -> None:
    verdict = check_comparison(_comparison(_side("a"), _side("b", year=2024)))
    assert isinstance(verdict, Rejected)
    assert verdict.error.category == "invalid_arguments"
    assert [f.message for f in verdict.error.field_errors] == ["fiscal year 2024 is not 2025"]


def test_the_verifier_rejects_a_currency_it_could_not_convert() -> None:
    verdict = check_comparison(_comparison(_side("a"), _side("b", currency="GBP")))
    assert isinstance(verdict, Rejected)
    assert verdict.error.field_errors[0].path == "/b"
    assert "no documented rate" in verdict.error.field_errors[0].message


def test_a_plan_comparing_two_fiscal_years_fails_only_the_comparison(tmp_path: Path) -> None:
    docs = DocumentStore(tmp_path / "documents.db")
    docs.seed()
    rt = build_runtime(docs, "memory://")
    try:
        plan = Plan(
            nodes=[
                PlanNode(id="a", tool="read_document", arguments={"doc_id": "nw-ar-2025"}),
                PlanNode(id="b", tool="read_document", arguments={"doc_id": "pl-ar-2024"}),
                PlanNode(
                    id="compare",
                    tool="compare_revenue",
                    arguments={"a": {"$ref": "a.data"}, "b": {"$ref": "b.data"}},
                    verify=check_comparison,
                ),
            ]
        )
        result = rt.run_plan(plan)
    finally:
        rt.close()
        docs.close()
    assert result.status == "partial"
    assert result.nodes["a"].ok and result.nodes["b"].ok
    error = result.nodes["compare"].error
    assert error is not None and error.category == "invalid_arguments"
    assert "fiscal year 2024 is not 2025" in error.message
