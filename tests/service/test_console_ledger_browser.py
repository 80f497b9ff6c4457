"""The console in headless Chromium: reconcile an unknown_commit, find a run's approval from its page.

Also: searching runs, and the API docs page (``/docs``) drawn from the vendored Swagger UI bundle.

Screenshots of each page at 1280 and 390 px wide go to ``test-artifacts/console/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import httpx
import pytest

from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import TOKENS, World, bearer, build_runtime, uvicorn_server
from tests.service.test_console_browser import CHROMIUM, CHROMIUM_ARGS, WAIT_MS, _artifacts

if TYPE_CHECKING:
    from playwright.sync_api import Page

ADMIN = "admin-token"
WIDTHS = (1280, 390)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@contextmanager
def _page(width: int, problems: list[str]) -> Iterator[Page]:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            expect.set_options(timeout=WAIT_MS)
            yield page
        finally:
            browser.close()


def _fits(page: Page, width: int) -> None:
    scroll = page.evaluate("document.documentElement.scrollWidth")
    assert scroll <= width + 1, f"the page scrolls sideways at {width} px ({scroll} px wide)"


def test_an_unknown_commit_is_reconciled_and_a_runs_approval_found_from_its_page() -> None:
    from playwright.sync_api import expect

    shots = _artifacts()
    world = World()
    rt, _ = build_runtime(world)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.1))
    held = rt.call({"name": "send_payment", "arguments": {"to": "acct-9", "amount": 500}}, run_id="r-pay")
    assert held.error is not None and held.error.category == "needs_approval"
    lost = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r-note", node_id="n1")
    assert lost.error is not None and lost.error.category == "unknown_commit"
    problems: list[str] = []
    try:
        with uvicorn_server(app) as base:
            for width in WIDTHS:
                with _page(width, problems) as page:
                    page.goto(f"{base}/runs/r-pay?token={ADMIN}")
                    section = page.locator("#run-approvals")
                    expect(section.locator("[data-request-id]")).to_have_count(1)
                    _fits(page, width)
                    page.screenshot(path=shots / f"run-approval-{width}.png", full_page=True)
                    section.get_by_role("link", name="decide it").click()
                    page.wait_for_url("**/approvals?run=r-pay")
                    card = page.locator("article.approval")
                    expect(card).to_have_count(1)
                    expect(card).to_contain_text("send_payment")
                    expect(card.locator("[data-argument=to] .value")).to_have_text("acct-9")
                    _fits(page, width)
                    page.screenshot(path=shots / f"approvals-of-run-{width}.png", full_page=True)

                    page.goto(f"{base}/runs?q=r-note")
                    expect(page.locator("tr[data-run-id]")).to_have_count(1)
                    _fits(page, width)
                    page.screenshot(path=shots / f"runs-search-{width}.png", full_page=True)

                    page.locator("[data-nav=ledger]").click()
                    if width == WIDTHS[0]:
                        unknown = page.locator("article.ledger-entry[data-state=unknown_commit]")
                        expect(unknown).to_have_count(1)
                        entry = page.locator(
                            f"article.ledger-entry[data-key={unknown.get_attribute('data-key')}]"
                        )
                        _fits(page, width)
                        page.screenshot(path=shots / f"ledger-{width}.png", full_page=True)
                        entry.get_by_label("Evidence").fill("note seen on the board at 10:02")
                        entry.get_by_label("What happened").select_option("committed")
                        entry.get_by_role("button", name="Record outcome").click()
                        expect(entry.locator("[role=status] [data-status]")).to_have_text("committed")
                        expect(entry).to_have_attribute("data-state", "committed")
                        page.screenshot(path=shots / f"ledger-reconciled-{width}.png", full_page=True)
                        page.goto(f"{base}/docs")  # Swagger UI from the vendored bundle, offline
                        expect(page.locator(".swagger-ui .info .title")).to_contain_text("actionspace")
                        page.screenshot(path=shots / "api-docs-1280.png")
                    else:
                        expect(page.locator("#ledger-list")).to_contain_text("No action waits")
                        page.goto(f"{base}/ledger?state=committed")
                        expect(page.locator("article.ledger-entry[data-state=committed]")).to_have_count(1)
                        _fits(page, width)
                        page.screenshot(path=shots / f"ledger-{width}.png", full_page=True)
            entries = httpx.get(f"{base}/api/ledger", headers=bearer(ADMIN), timeout=10).json()
        again = rt.call({"name": "post_note", "arguments": {"text": "hi"}}, run_id="r-note", node_id="n1")
    finally:
        app.state.runner.close()
        rt.close()
    [entry] = [e for e in entries if e["run_id"] == "r-note"]
    assert entry["state"] == "committed" and entry["resolution"]["by"] == "admin"
    assert entry["resolution"]["reason"] == "note seen on the board at 10:02"
    assert world.notes == ["hi"] and again.ok  # replayed, never sent twice
    assert problems == []
    for width in WIDTHS:
        for name in ("run-approval", "approvals-of-run", "runs-search", "ledger"):
            assert (shots / f"{name}-{width}.png").stat().st_size > 5_000
