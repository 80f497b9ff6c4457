"""The console against hostile data, in headless Chromium: the API answers are scripted.

Every page asset comes from ``create_app`` (through a TestClient, with its real headers, so its
Content-Security-Policy is enforced); every ``/api`` answer is a fixed JSON text written as a model
or a tool could shape it: markup in names, lookalike characters, ids that are URL syntax.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
TOKEN = "t1-token"
WAIT_MS = 10_000
MARKUP = '<img src=x id=injected onerror="window.pwned=1">'

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


@dataclass
class Scripted:
    """The scripted API: ``answers`` maps a path (with its query) to a JSON text; ``seen`` logs requests."""

    answers: dict[str, str]
    seen: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _approval(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "request_id": "req-1",
        "id": "req-1",
        "run_id": "run-1",
        "node_id": None,
        "tool": "transfer",
        "status": "pending",
        "reason": "moves money",
        "created_at": "2024-01-01T00:00:00Z",
        "arguments": {},
        "preview": {"tool": "transfer", "arguments": {}, "provenance": {}, "effects": []},
    }
    base.update(changes)
    return base


@contextmanager
def _console(answers: dict[str, str]) -> Iterator[tuple[Page, Scripted]]:
    from playwright.sync_api import expect, sync_playwright

    scripted = Scripted(answers)
    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens={TOKEN: Principal(id="admin", scopes=("*",))})
    client = TestClient(app)

    def handle(route: Route) -> None:
        request = route.request
        parts = urlsplit(request.url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        if parts.path.startswith("/api/"):
            scripted.seen.append((request.method, target))
            body = scripted.answers.get(f"{request.method} {target}")
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
                page.on("pageerror", lambda exc: scripted.problems.append(f"page error: {exc}"))
                page.route("**/*", handle)
                expect.set_options(timeout=WAIT_MS)
                page.goto(f"{BASE}/?token={TOKEN}")
                yield page, scripted
            finally:
                browser.close()
    finally:
        app.state.runner.close()
        rt.close()


def _hrefs(page: Page) -> list[str]:
    return list(page.eval_on_selector_all("a[href]", "els => els.map(a => a.getAttribute('href'))"))


def test_an_approval_shows_lookalike_invisible_and_huge_values_exactly_and_flags_them() -> None:
    from playwright.sync_api import expect

    # The amount's digits are more than a JavaScript number holds: JSON.parse would show ...7000.
    arguments = (
        '{"to": "acct-9\\u200b", "iban": "DE89\\u0410\\u0412", "amount": 12345678901234567891, '
        '"memo": "pay ", "plain": "acct-9", "note": "\\u202e9876", '
        f'"html": {json.dumps(MARKUP)}, "nested": {{"acct": "1\\u0661", "n": 98765432109876543210}}}}'
    )
    request = json.dumps(_approval(tool="transfer\u0430"))
    request = request.replace('"arguments": {}', f'"arguments": {arguments}')
    answers = {"GET /api/approvals?status=pending": f"[{request}]"}
    with _console(answers) as (page, scripted):
        page.goto(f"{BASE}/approvals")
        card = page.locator("article.approval")
        expect(card).to_have_count(1)
        values = {
            name: card.locator(f"[data-argument={name}] .value").inner_text()
            for name in ("to", "iban", "amount", "memo", "plain", "note", "html", "nested")
        }
        assert values["amount"] == "12345678901234567891"
        assert "98765432109876543210" in values["nested"]
        assert values["to"] == '"acct-9\\u200b"'
        assert values["iban"] == '"DE89\\u0410\\u0412"'
        assert values["note"] == '"\\u202e9876"'
        assert values["memo"] == '"pay "'
        assert values["plain"] == "acct-9"
        assert '"acct": "1\\u0661"' in values["nested"]
        assert values["html"] == MARKUP
        for name in ("to", "iban", "note", "memo", "nested"):
            expect(card.locator(f"[data-argument={name}] .flag")).not_to_have_count(0)
        expect(card.locator("[data-argument=plain] .flag")).to_have_count(0)
        expect(card.locator(".tool-name").first).to_have_text('"transfer\\u0430"')
        as_json = card.locator(".call-json pre").text_content() or ""
        assert "12345678901234567891" in as_json and "\\u200b" in as_json and "\\u0430" in as_json
        assert page.locator("#injected").count() == 0
        assert page.evaluate("window.pwned") is None
        assert scripted.problems == []


def test_ids_that_are_url_syntax_stay_one_encoded_path_segment_and_links_stay_on_the_console() -> None:
    from playwright.sync_api import expect

    odd_id = "../../ledger?x=1#frag"
    request = _approval(request_id=odd_id, id=odd_id, run_id="javascript:alert(1)//", tool=MARKUP)
    decided = {**request, "status": "approved", "decided_by": "admin"}
    answers = {
        "GET /api/approvals?status=pending": json.dumps([request]),
        "POST /api/approvals/..%2F..%2Fledger%3Fx%3D1%23frag/approve": json.dumps(decided),
    }
    with _console(answers) as (page, scripted):
        page.goto(f"{BASE}/approvals")
        card = page.locator("article.approval")
        expect(card).to_have_count(1)
        assert all(href.startswith("/") and not href.startswith("//") for href in _hrefs(page))
        card.locator("button.approve").click()
        expect(card.locator("[role=status] .badge")).to_have_text("approved")
        posts = [target for method, target in scripted.seen if method == "POST"]
        assert posts == ["/api/approvals/..%2F..%2Fledger%3Fx%3D1%23frag/approve"]
        assert page.locator("#injected").count() == 0
        assert scripted.problems == []


@pytest.mark.parametrize("key", ["..", "."])
def test_a_dot_segment_key_is_never_resolved_into_another_endpoint(key: str) -> None:
    from playwright.sync_api import expect

    entry = {
        "key": key,
        "tool": "post_note",
        "state": "unknown_commit",
        "run_id": "r",
        "node_id": "n",
        "attempts": 1,
        "arguments": {},
        "updated_at": "2024-01-01T00:00:00Z",
    }
    with _console({"GET /api/ledger?state=unknown_commit": json.dumps([entry])}) as (page, scripted):
        page.goto(f"{BASE}/ledger")
        form = page.locator("form.resolve")
        expect(form).to_have_count(1)
        form.locator("textarea").fill("seen in the statement")
        form.locator("button[type=submit]").click()
        expect(form.locator("[role=status]")).not_to_be_empty()
        posts = [target for method, target in scripted.seen if method == "POST"]
        assert posts == []


def test_a_malformed_escape_in_the_address_shows_not_found_instead_of_hanging() -> None:
    from playwright.sync_api import expect

    with _console({}) as (page, scripted):
        page.goto(f"{BASE}/runs/%E0%A4%A")
        expect(page.locator("#view h1")).to_have_text("Not found")
        assert scripted.problems == []
