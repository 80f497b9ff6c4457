"""Paged tools over a real SQLite table: pages, cursors, completeness verifiers and aggregation."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Observation, Plan, Provenance, Runtime, ToolCall, ToolResult
from actionspace.errors import ConfigurationError
from actionspace.observation.aggregate import Count, Distinct, Sum, TopK, aaggregate, aggregate
from actionspace.observation.pagination import decode_cursor, encode_cursor, page, page_items
from actionspace.observation.verify import (
    fields_equal,
    final,
    fresh,
    lookup,
    no_other_items,
    predicate,
)
from actionspace.validation.verdicts import Accepted, Rejected

ROWS = 1000
LIST = {"name": "list_orders", "arguments": {"limit": 100}}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(tmp_path / "orders.db", check_same_thread=False)
    conn.execute(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer TEXT NOT NULL, amount INTEGER NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO orders VALUES (?, ?, ?)",
        [(i, f"c{i % 37}", (i * 7919) % 1009) for i in range(1, ROWS + 1)],
    )
    conn.commit()
    yield conn
    conn.close()


def _runtime(db: sqlite3.Connection, *, max_observation_bytes: int = 65_536) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read", max_observation_bytes=max_observation_bytes)
    def list_orders(limit: int = 100, cursor: str | None = None) -> ToolResult:
        """List orders by id, one page at a time.

        Args:
            limit: Orders per page (1 to 500).
            cursor: Where to continue; from the previous page.
        """
        after_id = int(decode_cursor(cursor)["id"]) if cursor is not None else 0
        rows = db.execute(
            "SELECT id, customer, amount FROM orders WHERE id > ? ORDER BY id LIMIT ?",
            (after_id, min(max(limit, 1), 500) + 1),
        ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        (total,) = db.execute("SELECT COUNT(*) FROM orders").fetchone()
        return page(
            [{"id": i, "customer": c, "amount": a} for i, c, a in rows],
            cursor=encode_cursor({"id": rows[-1][0]}) if more else None,
            total=total,
            sort_key="id",
            after=cursor,
        )

    return rt


def _walk(rt: Runtime, limit: int = 100) -> list[Observation]:
    pages: list[Observation] = []
    cursor: str | None = None
    while True:
        arguments: dict[str, Any] = {"limit": limit}
        if cursor is not None:
            arguments["cursor"] = cursor
        obs = rt.call(ToolCall(name="list_orders", arguments=arguments), run_id="r1")
        assert obs.status == "ok", obs.error
        pages.append(obs)
        cursor = obs.cursor
        if cursor is None:
            return pages


def _ids(pages: list[Observation]) -> list[int]:
    return [item["id"] for obs in pages for item in page_items(obs) or []]


def _reason(verdict: Accepted | Rejected) -> str:
    assert isinstance(verdict, Rejected)
    assert verdict.error.category == "permanent"
    reason: str = verdict.error.details["reason"]
    return reason


def test_pages_walk_the_whole_table_in_order_with_cursor_total_and_sort_key(db: sqlite3.Connection) -> None:
    pages = _walk(_runtime(db))
    assert len(pages) == 10
    assert _ids(pages) == list(range(1, ROWS + 1))
    assert [o.complete for o in pages] == [False] * 9 + [True]
    assert all(o.total == ROWS and o.diagnostics["sort_key"] == "id" for o in pages)
    assert "after" not in pages[0].diagnostics
    assert [o.diagnostics["after"] for o in pages[1:]] == [o.cursor for o in pages[:-1]]


def test_a_cursor_round_trips_to_the_position_it_encodes() -> None:
    position = {"id": 250, "at": "2024-01-01T00:00:00Z"}
    assert decode_cursor(encode_cursor(position)) == position


def test_a_malformed_cursor_is_an_invalid_arguments_error(db: sqlite3.Connection) -> None:
    obs = _runtime(db).call(
        ToolCall(name="list_orders", arguments={"cursor": "%%%not-a-cursor"}), run_id="r1"
    )
    assert obs.error is not None and obs.error.category == "invalid_arguments"


def test_no_other_items_is_rejected_after_the_first_page_with_the_cursor_to_continue(
    db: sqlite3.Connection,
) -> None:
    first = _walk(_runtime(db))[0]
    verdict = no_other_items()(first)
    assert _reason(verdict) == "incomplete_listing"
    assert isinstance(verdict, Rejected)
    assert verdict.error.details["cursor"] == first.cursor
    assert "fetch_next_page" in verdict.error.recovery


def test_no_other_items_is_accepted_after_the_last_page_of_an_unbroken_walk(db: sqlite3.Connection) -> None:
    pages = _walk(_runtime(db))
    assert isinstance(no_other_items()(pages), Accepted)
    assert isinstance(no_other_items()(pages, ROWS), Accepted)
    assert _reason(no_other_items()(pages, ROWS - 1)) == "claim_mismatch"
    claimed = [{"id": i} for i in range(1, ROWS)]
    rejected = no_other_items(id_field="id")(pages, claimed)
    assert _reason(rejected) == "claim_mismatch"
    assert isinstance(rejected, Rejected) and rejected.error.details["missing"] == [ROWS]


def test_no_other_items_rejects_the_last_page_alone_and_a_walk_with_a_gap(db: sqlite3.Connection) -> None:
    pages = _walk(_runtime(db))
    assert _reason(no_other_items()(pages[-1])) == "incomplete_listing"
    assert _reason(no_other_items()(pages[:4] + pages[5:])) == "incomplete_listing"


def test_no_other_items_rejects_a_trimmed_page(db: sqlite3.Connection) -> None:
    rt = _runtime(db, max_observation_bytes=1024)
    only = rt.call(ToolCall(name="list_orders", arguments={"limit": 500}), run_id="r1")
    assert not only.complete and only.trimming is not None
    assert _reason(no_other_items()(only)) == "trimmed"


def test_no_other_items_rejects_a_cached_observation_past_its_freshness_bound() -> None:
    cached = Observation(
        call_id="c1",
        tool="list_orders",
        data={"items": []},
        provenance=Provenance(source="cache", fetched_at=time.time() - 600),
    )
    assert isinstance(no_other_items()(cached), Accepted)
    assert _reason(no_other_items(max_age_s=60)(cached)) == "stale_observation"
    assert _reason(fresh(60)(cached)) == "stale_observation"


def test_aggregation_equals_sql_count_sum_distinct_and_top_k(db: sqlite3.Connection) -> None:
    rt = _runtime(db)
    reducers = [Count(), Sum("amount"), Distinct("customer"), TopK("amount", 3)]
    result = aggregate(rt, LIST, reducer=reducers, max_pages=20, max_items=5000, run_id="r1")
    (count, total, customers) = db.execute(
        "SELECT COUNT(*), SUM(amount), COUNT(DISTINCT customer) FROM orders"
    ).fetchone()
    top = db.execute("SELECT id FROM orders ORDER BY amount DESC, id ASC LIMIT 3").fetchall()
    assert result.complete and result.status == "ok"
    assert result.data["count"] == count == ROWS
    assert result.data["sum_amount"] == total
    assert result.data["distinct_customer"]["count"] == customers
    assert [item["id"] for item in result.data["top3_amount"]] == [i for (i,) in top]
    assert result.data["pages"] == 10
    assert isinstance(no_other_items()(result), Accepted)


def test_every_aggregated_page_is_a_traced_call(db: sqlite3.Connection) -> None:
    rt = _runtime(db)
    result = aggregate(
        rt, LIST, reducer=Count(), max_pages=20, max_items=5000, run_id="r1", node_prefix="agg"
    )
    dispatched = [e for e in rt.trace.events("r1") if e.kind == "dispatched"]
    assert [e.data["node_id"] for e in dispatched] == [f"agg.p{i}" for i in range(1, 11)]
    assert len(result.diagnostics["page_calls"]) == 10
    assert [e.data["pages"] for e in rt.trace.events("r1") if e.kind == "aggregated"] == [10]


def test_aggregation_stopped_by_a_bound_is_incomplete_and_resumes_from_its_cursor(
    db: sqlite3.Connection,
) -> None:
    rt = _runtime(db)
    part = aggregate(rt, LIST, reducer=Sum("amount"), max_pages=3, max_items=5000, run_id="r1")
    assert not part.complete and part.diagnostics["stopped_by"] == "max_pages"
    assert part.data["items"] == 300 and part.cursor is not None
    assert _reason(no_other_items()(part)) == "incomplete_listing"
    rest_call = {"name": "list_orders", "arguments": {"limit": 100, "cursor": part.cursor}}
    rest = aggregate(rt, rest_call, reducer=Sum("amount"), max_pages=20, max_items=5000, run_id="r1")
    (total,) = db.execute("SELECT SUM(amount) FROM orders").fetchone()
    assert rest.complete and part.data["sum_amount"] + rest.data["sum_amount"] == total
    by_items = aggregate(rt, LIST, reducer=Count(), max_pages=20, max_items=250, run_id="r1")
    assert by_items.diagnostics["stopped_by"] == "max_items" and by_items.data["count"] == 300


def test_aggregation_reads_trimmed_pages_in_full_from_their_artifacts(db: sqlite3.Connection) -> None:
    rt = _runtime(db, max_observation_bytes=1024)
    call = {"name": "list_orders", "arguments": {"limit": 250}}
    result = asyncio.run(aaggregate(rt, call, reducer=[Count(), Sum("amount")], max_pages=10, max_items=5000))
    (total,) = db.execute("SELECT SUM(amount) FROM orders").fetchone()
    assert result.complete and result.data["count"] == ROWS and result.data["sum_amount"] == total


def test_a_failed_page_ends_the_aggregate_as_partial_with_its_error(db: sqlite3.Connection) -> None:
    rt = _runtime(db)
    call = {"name": "list_orders", "arguments": {"limit": 100, "cursor": "%%%"}}
    result = aggregate(rt, call, reducer=Count(), max_pages=5, max_items=5000, run_id="r1")
    assert result.status == "partial" and not result.complete
    assert result.error is not None and result.error.category == "invalid_arguments"
    assert result.diagnostics["stopped_by"] == "page_failed"


def test_aggregation_bounds_and_reducer_names_are_checked(db: sqlite3.Connection) -> None:
    rt = _runtime(db)
    with pytest.raises(ConfigurationError):
        aggregate(rt, LIST, reducer=Count(), max_pages=0, max_items=10)
    with pytest.raises(ConfigurationError):
        aggregate(rt, LIST, reducer=[Count(), Count()], max_pages=1, max_items=10)


def test_field_and_predicate_verifiers_compose() -> None:
    obs = Observation(call_id="c1", tool="get_event", data={"status": "confirmed", "items": [{"id": "e1"}]})
    assert lookup(obs, "data.items[0].id") == "e1"
    assert isinstance(fields_equal(status="confirmed")(obs), Accepted)
    assert _reason(fields_equal({"data.items[0].id": "e2"})(obs)) == "field_mismatch"
    assert _reason(fields_equal({"data.items[3].id": "e1"})(obs)) == "field_mismatch"
    has_items = predicate(lambda o: bool(o.data["items"]), reason="empty")
    assert isinstance((final() & has_items & fields_equal(status="confirmed"))(obs), Accepted)
    assert _reason((has_items & fields_equal(status="draft"))(obs)) == "field_mismatch"
    assert isinstance((fields_equal(status="draft") | has_items)(obs), Accepted)


def test_a_plan_node_verified_by_no_other_items_fails_on_a_first_page(db: sqlite3.Connection) -> None:
    rt = _runtime(db)
    plan = Plan.from_dict(
        {"nodes": [{"id": "n1", "tool": "list_orders", "arguments": {"limit": 100}}]},
        verify={"n1": no_other_items()},
    )
    result = rt.run_plan(plan, run_id="p1")
    node = result.nodes["n1"]
    assert node.status == "error" and node.error is not None
    assert node.error.details["reason"] == "incomplete_listing"
    assert [e.data["verdict"] for e in rt.trace.events("p1") if e.kind == "verified"] == ["rejected"]
