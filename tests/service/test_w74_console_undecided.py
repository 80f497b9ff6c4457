"""The console's tools pages show a tool's undecided calls (waiting for approval, told
``unknown_commit``) from ``/api/metrics`` beside its failures, never folded into them.

The page assets come from ``create_app`` through a TestClient; the ``/api`` answers are scripted,
so the figures on the page can only come from the fields under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import create_app

if TYPE_CHECKING:
    from playwright.sync_api import Page, Route

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
BASE = "http://console.test"
TOKEN = "w74-token"
WAIT_MS = 10_000

HEALTH: dict[str, Any] = {
    "tool": "pay",
    "calls": 9,
    "selection_rate": 1.0,
    "rejects": 0,
    "rejects_by_category": {},
    "rejects_by_field": {},
    "failures": 2,
    "failures_by_category": {"transient": 2},
    "undecided": 7,
    "undecided_by_category": {"needs_approval": 4, "unknown_commit": 3},
    "unknown_commits": 1,
    "ok_results": 0,
    "replays": 0,
    "used_results": 0,
    "utilization": None,
    "consumers": 0,
    "consumers_ok": 0,
    "downstream_success": None,
}
SPEC: dict[str, Any] = {
    "name": "pay",
    "version": "1",
    "description": "Pay someone.",
    "effect": "external",
    "risk": "high",
    "input_schema": {"type": "object"},
    "schema_hash": "abc",
}
ANSWERS = {
    "GET /api/metrics": json.dumps({"runs": 3, "calls": 9, "since": None, "tools": [HEALTH], "alerts": []}),
    "GET /api/catalog": json.dumps([SPEC]),
    "GET /api/catalog/pay": json.dumps(SPEC),
}


def test_the_served_tools_page_renders_the_undecided_fields_of_the_metrics() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens={TOKEN: Principal(id="admin", scopes=("*",))})
    try:
        script = TestClient(app).get("/static/tools.js")
    finally:
        app.state.runner.close()
        rt.close()
    assert script.status_code == 200
    assert '"Undecided"' in script.text
    assert "t.undecided ||" in script.text
    assert "t.undecided_by_category" in script.text


@contextmanager
def _console() -> Iterator[tuple[Page, list[str]]]:
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens={TOKEN: Principal(id="admin", scopes=("*",))})
    client = TestClient(app)

    def handle(route: Route) -> None:
        parts = urlsplit(route.request.url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.path.startswith("/api/"):
            body = ANSWERS.get(f"{route.request.method} {target}")
            if body is None:
                route.fulfill(
                    status=404, content_type="application/json", body='{"error": {"message": "no"}}'
                )
            else:
                route.fulfill(status=200, content_type="application/json", body=body)
            return
        served = client.get(target)
        route.fulfill(status=served.status_code, headers=dict(served.headers), body=served.content)

    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page()
                page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
                page.route("**/*", handle)
                expect.set_options(timeout=WAIT_MS)
                page.goto(f"{BASE}/?token={TOKEN}")
                yield page, problems
            finally:
                browser.close()
    finally:
        app.state.runner.close()
        rt.close()


def _cell(page: Page, header: str) -> str:
    headers = [h.strip() for h in page.locator("table.tools thead th").all_text_contents()]
    assert header in headers, headers
    column = headers.index(header)
    return page.locator("table.tools tbody tr[data-tool=pay] td").nth(column).inner_text().strip()


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_the_tools_table_shows_undecided_calls_apart_from_failures() -> None:
    from playwright.sync_api import expect

    with _console() as (page, problems):
        page.goto(f"{BASE}/tools")
        expect(page.locator("table.tools tbody tr[data-tool=pay]")).to_have_count(1)
        assert _cell(page, "Failures") == "2"
        assert _cell(page, "Undecided") == "7"
        assert problems == []


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")
def test_a_tools_page_lists_its_undecided_calls_by_category() -> None:
    from playwright.sync_api import expect

    with _console() as (page, problems):
        page.goto(f"{BASE}/tools/pay")
        table = page.locator("[data-counts=undecided_by_category]")
        expect(table).to_have_count(1)
        rows = {
            row.locator("td").nth(0).inner_text(): row.locator("td").nth(1).inner_text()
            for row in table.locator("tbody tr").all()
        }
        assert rows == {"needs_approval": "4", "unknown_commit": "3"}
        summary = dict(
            zip(
                page.locator(".summary .k").all_text_contents(),
                page.locator(".summary .v").all_text_contents(),
                strict=True,
            )
        )
        assert (summary["failures"], summary["undecided"]) == ("2", "7")
        assert problems == []
