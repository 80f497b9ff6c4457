"""Scenario 4 of the design: compare two companies' latest annual revenue, checked by a verifier.

"Parallel searches; one source is a news summary, so a follow-up read of the official report; a
verifier checks currency, fiscal year and source before the comparison is accepted." The first
plan compares the two top search hits and is rejected by the verifier (one is a news figure); the
second adds a follow-up read of the report the news summarised, and its comparison is accepted.
The verdict is recomputed from the document store itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actionspace.demo.documents import DocumentStore
from actionspace.demo.steps import PlanStep, steps_of
from actionspace.errors import ActionError, FieldError, ToolError
from actionspace.execution.result import ToolResult
from actionspace.plan import Plan, PlanNode, PlanResult
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Observation
from actionspace.validation.verdicts import ACCEPTED, Accepted, Rejected

__all__ = ["COMPANIES", "REQUEST", "RevenueReport", "build_runtime", "check_comparison", "run_revenue"]

USER = "u-lin"
REQUEST = "compare Nordwind's and Pacific Loom's latest annual revenue"
COMPANIES = ("Nordwind", "Pacific Loom")
CURRENCY = "EUR"
OFFICIAL = "annual_report"
PRINCIPAL = Principal(id=USER, scopes=("read:*", "none:*"))


def check_comparison(obs: Observation) -> Accepted | Rejected:
    """Accept a comparison only of official figures, of one fiscal year, in one currency.

    A side in another currency must have been converted with a documented rate. A rejection is
    ``invalid_arguments`` naming the side (``/a`` or ``/b``) and what to read instead.
    """
    data = obs.data
    problems: list[FieldError] = []
    follow_up: dict[str, str] = {}
    for name, side in (("a", data["a"]), ("b", data["b"])):
        if side["source"] != OFFICIAL:
            problems.append(
                FieldError(
                    path=f"/{name}",
                    message=f"{side['doc_id']} is a {side['source'].replace('_', ' ')} by "
                    f"{side['publisher']}, not the company's annual report",
                )
            )
            if side.get("summarises"):
                follow_up[name] = side["summarises"]
        converted = side["converted"]
        if converted["currency"] != data["currency"] or converted["amount"] is None:
            problems.append(
                FieldError(
                    path=f"/{name}",
                    message=f"{side['reported']['currency']} has no documented rate into {data['currency']}",
                )
            )
    if data["a"]["fiscal_year"] != data["b"]["fiscal_year"]:
        problems.append(
            FieldError(
                path="/b",
                message=f"fiscal year {data['b']['fiscal_year']} is not {data['a']['fiscal_year']}",
            )
        )
    if not problems:
        return ACCEPTED
    return Rejected(
        ActionError.of(
            "invalid_arguments",
            "the comparison cannot be accepted: " + "; ".join(p.message for p in problems),
            field_errors=problems,
            details={"read_instead": follow_up} if follow_up else {},
        )
    )


def build_runtime(store: DocumentStore, trace_store: str) -> Runtime:
    """The runtime with the document store's search, read and the comparison."""
    rt = Runtime(trace_store, principal=PRINCIPAL, state={"documents": store})

    @rt.tool(effect="read", reads=["search:{company}"])
    def search_documents(company: str) -> ToolResult:
        """Documents about a company's annual revenue, newest first.

        Args:
            company: Company name or part of it.
        """
        hits = store.search(company)
        if not hits:
            raise ToolError("permanent", f"no documents about {company!r}")
        return ToolResult(data={"company": company, "hits": [_figure(h) for h in hits]})

    @rt.tool(effect="read", reads=["document:{doc_id}"])
    def read_document(doc_id: str) -> ToolResult:
        """One document's revenue figure, fiscal year, currency and source.

        Args:
            doc_id: Document id from a search hit (or a summary's ``summarises``).
        """
        doc = store.document(doc_id)
        if doc is None:
            raise ToolError("permanent", f"no document {doc_id}", resource_ids=[f"document:{doc_id}"])
        return ToolResult(data=_figure(doc), resource_version=doc["published"])

    @rt.tool(effect="none", blocking=False)
    def compare_revenue(a: dict[str, Any], b: dict[str, Any], currency: str = CURRENCY) -> dict[str, Any]:
        """Compare two revenue figures, converted into one currency with the documented FX rate.

        Args:
            a: A figure as returned by search_documents or read_document.
            b: The other figure.
            currency: ISO 4217 code to compare in. Default EUR.
        """
        sides = [_convert(store, side, currency) for side in (a, b)]
        out: dict[str, Any] = {"currency": currency, "a": sides[0], "b": sides[1]}
        amounts = [s["converted"]["amount"] for s in sides]
        if None not in amounts:
            larger = 0 if amounts[0] >= amounts[1] else 1
            out["larger"] = sides[larger]["company"]
            out["difference"] = round(abs(amounts[0] - amounts[1]), 1)
            out["ratio"] = round(amounts[larger] / amounts[1 - larger], 4)
        return out

    return rt


def _figure(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "doc_id": doc["id"],
        "company": doc["company"],
        "title": doc["title"],
        "source": doc["kind"],
        "publisher": doc["publisher"],
        "published": doc["published"],
        "fiscal_year": doc["fiscal_year"],
        "revenue_m": doc["revenue_m"],
        "currency": doc["currency"],
        "summarises": doc["summarises"],
    }


def _convert(store: DocumentStore, side: Mapping[str, Any], currency: str) -> dict[str, Any]:
    rate = store.rate(str(side["currency"]), currency, int(side["fiscal_year"]))
    amount = round(float(side["revenue_m"]) * rate[0], 1) if rate else None
    return {
        **{k: side.get(k) for k in ("doc_id", "company", "source", "publisher", "fiscal_year", "summarises")},
        "reported": {"amount": side["revenue_m"], "currency": side["currency"]},
        "converted": {"amount": amount, "currency": currency if rate else side["currency"]},
        "rate": rate[0] if rate else None,
        "rate_source": rate[1] if rate else None,
    }


def describe(obs: Observation) -> str | None:
    """A successful observation in words."""
    data = obs.data
    if obs.tool == "search_documents":
        top = data["hits"][0]
        return f"top hit {top['doc_id']}: {_said(top)} ({len(data['hits'])} hits)"
    if obs.tool == "read_document":
        return f"{data['doc_id']}: {_said(data)}"
    if obs.tool == "compare_revenue" and "larger" in data:
        return (
            f"{data['larger']} larger by {data['currency']} {data['difference']:,.1f} M "
            f"(ratio {data['ratio']}); {data['a']['doc_id']} vs {data['b']['doc_id']}"
        )
    return None


def _said(fig: Mapping[str, Any]) -> str:
    return (
        f"{fig['source'].replace('_', ' ')} by {fig['publisher']}, FY{fig['fiscal_year']} "
        f"{fig['currency']} {fig['revenue_m']:,.0f} M"
    )


@dataclass
class RevenueReport:
    """What scenario 4 did, and the verdict recomputed from the document store."""

    run_id: str
    store: str
    folder: str
    request: str
    steps: list[PlanStep]
    plans: dict[str, str]
    comparison: dict[str, Any] | None
    """The accepted comparison's data (None when none was accepted)."""
    checks: dict[str, bool] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": 4,
            "run_id": self.run_id,
            "store": self.store,
            "folder": self.folder,
            "request": self.request,
            "steps": [s.to_dict() for s in self.steps],
            "plans": self.plans,
            "comparison": self.comparison,
            "checks": self.checks,
            "passed": self.passed,
        }


_SEARCH = {
    "search-a": {"company": COMPANIES[0]},
    "search-b": {"company": COMPANIES[1]},
}


def _searches() -> list[PlanNode]:
    return [PlanNode(id=k, tool="search_documents", arguments=v) for k, v in _SEARCH.items()]


def run_revenue(folder: Path, *, store: str) -> RevenueReport:
    """Run scenario 4 against a document store in ``folder``; the trace goes to ``store``."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = DocumentStore(folder / "documents.db")
    docs.seed()
    rt = build_runtime(docs, store)
    run_id = rt.new_run(principal=PRINCIPAL)
    try:
        return _play(rt, docs, run_id, store, folder)
    finally:
        rt.close()
        docs.close()


def _play(rt: Runtime, docs: DocumentStore, run_id: str, store: str, folder: Path) -> RevenueReport:
    first = rt.run_plan(
        Plan(
            nodes=[
                *_searches(),
                PlanNode(
                    id="compare",
                    tool="compare_revenue",
                    arguments={
                        "a": {"$ref": "search-a.data.hits[0]"},
                        "b": {"$ref": "search-b.data.hits[0]"},
                    },
                    verify=check_comparison,
                ),
            ]
        ),
        run_id=run_id,
    )
    steps = steps_of(
        first,
        plan="first",
        start=1,
        intents={
            "search-a": f"search {COMPANIES[0]}",
            "search-b": f"search {COMPANIES[1]}",
            "compare": "compare the two top hits",
        },
        next_moves={
            "search-a": "feed its top hit to the comparison",
            "search-b": "feed its top hit to the comparison",
            "invalid_arguments": "read the official report the news summarised",
        },
        describe=describe,
    )
    rejected = first.nodes["compare"].error
    follow_up = dict(rejected.details.get("read_instead", {})) if rejected is not None else {}
    official_b = follow_up.get("b")
    b_ref = {"$ref": "read-b.data"} if official_b else {"$ref": "search-b.data.hits[0]"}
    nodes = [*_searches()]
    if official_b:
        nodes.append(
            PlanNode(
                id="read-b",
                tool="read_document",
                arguments={"doc_id": {"$ref": "search-b.data.hits[0].summarises"}},
            )
        )
    nodes.append(
        PlanNode(
            id="compare-official",
            tool="compare_revenue",
            arguments={"a": {"$ref": "search-a.data.hits[0]"}, "b": b_ref},
            verify=check_comparison,
        )
    )
    second = rt.run_plan(Plan(nodes=nodes), run_id=run_id)
    intents = {
        "search-a": f"search {COMPANIES[0]} again",
        "search-b": f"search {COMPANIES[1]} again",
        "read-b": "follow up: read the report the news summarised",
        "compare-official": "compare the official figures",
    }
    steps += steps_of(
        second,
        plan="follow-up",
        start=len(steps) + 1,
        intents={k: v for k, v in intents.items() if k in second.nodes},
        next_moves={
            "search-a": "already the annual report: compare it",
            "search-b": "its news hit names the report it summarises",
            "read-b": "compare with this official figure",
            "compare-official": "accepted by the verifier: done",
        },
        describe=describe,
    )
    accepted = second.nodes["compare-official"]
    report = RevenueReport(
        run_id=run_id,
        store=store,
        folder=str(folder),
        request=REQUEST,
        steps=steps,
        plans={"first": first.status, "follow-up": second.status},
        comparison=dict(accepted.data) if accepted.ok else None,
    )
    report.checks = _checks(docs, first, report)
    rt.record(run_id, "verified", {"predicate": "scenario 4 checks", "checks": report.checks})
    rt.finish(run_id, status="ok" if report.passed else "failed")
    return report


def _checks(docs: DocumentStore, first: PlanResult, report: RevenueReport) -> dict[str, bool]:
    """The verdict, from the store's own documents and rates (not from what the plans intended)."""
    rejected = first.nodes["compare"]
    news_side = rejected.data["b"]["doc_id"] if rejected.data else None
    news_doc = docs.document(str(news_side)) if news_side else None
    comparison = report.comparison or {}
    sides = [comparison[k] for k in ("a", "b") if k in comparison]
    truth = [docs.document(str(s["doc_id"])) for s in sides]
    latest = [docs.latest_report(str(s["company"])) for s in sides]

    def converted_right(side: Mapping[str, Any]) -> bool:
        rate = docs.rate(side["reported"]["currency"], comparison["currency"], side["fiscal_year"])
        return rate is not None and side["converted"]["amount"] == round(
            side["reported"]["amount"] * rate[0], 1
        )

    return {
        "the news-based comparison was rejected by the verifier": rejected.error is not None
        and rejected.error.category == "invalid_arguments"
        and news_doc is not None
        and news_doc["kind"] == "news_summary",
        "a comparison was accepted": len(sides) == 2,
        "both figures are the companies' latest annual reports": len(sides) == 2
        and all(
            t is not None and lt is not None and t["id"] == lt["id"]
            for t, lt in zip(truth, latest, strict=True)
        ),
        "the figures are the reports' own": len(sides) == 2
        and all(
            t is not None and s["reported"] == {"amount": t["revenue_m"], "currency": t["currency"]}
            for s, t in zip(sides, truth, strict=True)
        ),
        "one fiscal year": len({s["fiscal_year"] for s in sides}) == 1,
        "one currency, converted at the documented rate": len(sides) == 2
        and all(converted_right(s) for s in sides),
    }
