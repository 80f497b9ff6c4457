"""A paged walk whose listing shifted under it: equal counts, one item twice, one never seen."""

from __future__ import annotations

import sqlite3
from typing import Any

from actionspace import Observation, Runtime, ToolResult
from actionspace.observation.pagination import decode_cursor, encode_cursor, page
from actionspace.validation.verdicts import Accepted, Rejected
from actionspace.verify import no_other_items


def _runtime(db: sqlite3.Connection) -> Runtime:
    rt = Runtime("memory://")

    @rt.tool(effect="read")
    def list_files(limit: int = 3, cursor: str | None = None) -> ToolResult:
        """Files by name, ``limit`` per page, continued by offset."""
        offset = int(decode_cursor(cursor)["offset"]) if cursor is not None else 0
        rows = db.execute(
            "SELECT id, name FROM files ORDER BY name LIMIT ? OFFSET ?", (limit, offset)
        ).fetchall()
        (total,) = db.execute("SELECT COUNT(*) FROM files").fetchone()
        more = offset + len(rows) < total
        return page(
            [{"id": i, "name": n} for i, n in rows],
            cursor=encode_cursor({"offset": offset + len(rows)}) if more else None,
            total=total,
            sort_key="name",
            after=cursor,
        )

    return rt


def _walk(rt: Runtime, between: Any = None) -> list[Observation]:
    pages: list[Observation] = []
    cursor: str | None = None
    while True:
        args: dict[str, Any] = {"limit": 3} if cursor is None else {"limit": 3, "cursor": cursor}
        obs = rt.call({"name": "list_files", "arguments": args})
        assert obs.status == "ok", obs.error
        pages.append(obs)
        if obs.cursor is None:
            return pages
        if between is not None:
            between()
            between = None
        cursor = obs.cursor


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(":memory:", check_same_thread=False)
    db.execute("CREATE TABLE files (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.executemany("INSERT INTO files VALUES (?, ?)", [(i, n) for i, n in enumerate("abcdef", 1)])
    return db


def test_an_unbroken_walk_is_accepted() -> None:
    pages = _walk(_runtime(_db()))
    assert isinstance(no_other_items(id_field="id")(pages), Accepted)


def test_a_walk_with_a_duplicated_and_a_missing_item_is_rejected_although_the_counts_match() -> None:
    db = _db()

    def rename_e_to_sort_first() -> None:  # "e" moves before the offset: read never, "c" read twice
        db.execute("UPDATE files SET name = 'a2' WHERE name = 'e'")

    pages = _walk(_runtime(db), between=rename_e_to_sort_first)
    ids = [item["id"] for obs in pages for item in obs.data["items"]]
    assert len(ids) == pages[-1].total == 6  # the counts match: a count check alone accepts this
    assert 5 not in ids and ids.count(3) == 2
    for verdict in (no_other_items(id_field="id")(pages), no_other_items()(pages)):
        assert isinstance(verdict, Rejected)
        assert verdict.error.details["reason"] == "duplicate_items"
        assert verdict.error.recovery == ("observe_again",)
    by_id = no_other_items(id_field="id")(pages)
    assert isinstance(by_id, Rejected) and by_id.error.details["duplicates"] == [3]


def test_a_gap_left_by_a_deletion_behind_the_cursor_is_rejected_although_the_counts_match() -> None:
    db = _db()
    pages = _walk(_runtime(db), between=lambda: db.execute("DELETE FROM files WHERE name = 'a'"))
    ids = [item["id"] for obs in pages for item in obs.data["items"]]
    assert len(ids) == pages[-1].total == 5 and 4 not in ids  # "d" was skipped, "a" read stale
    verdict = no_other_items(id_field="id")(pages)
    assert isinstance(verdict, Rejected)
    assert verdict.error.details["reason"] == "listing_changed"
    assert verdict.error.details["totals"] == [6, 5]
