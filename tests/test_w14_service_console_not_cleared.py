"""The console's approvals queue, in headless Chromium, for a token the request's values are
redacted for: Approve is disabled, with the reason shown, and Deny still works; a cleared token's
Approve works. Served by a real uvicorn server over a real store."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from actionspace import Principal, Runtime
from actionspace.approval.requests import LABEL, ApprovalRequest
from actionspace.service import RunnerConfig, create_app
from tests.service.apptools import uvicorn_server

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
WAIT_MS = 20_000
DECIDE = ("approvals:read", "approvals:decide")
TOKENS = {
    "bob-token": Principal(id="bob", scopes=DECIDE),
    "ops-token": Principal(id="ops", scopes=(*DECIDE, "labels:secret")),
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


def _request(run_id: str) -> ApprovalRequest:
    return ApprovalRequest(
        id=f"apr_{run_id}",
        run_id=run_id,
        node_id="n1",
        tool="wire_funds@1",
        args_digest=f"d-{run_id}",
        arguments={"account": "hunter2-acct"},
        provenance={"account": "tool_result:x"},
        details={LABEL: {"confidentiality": "secret", "integrity": "trusted", "readers": None}},
        created_at=time.time(),
    )


def test_an_uncleared_token_sees_approve_disabled_and_may_deny_while_a_cleared_one_approves() -> None:
    from playwright.sync_api import expect, sync_playwright

    rt = Runtime("memory://", recover_on_start=False)
    first, second = rt.approvals.store.create(_request("r1")), rt.approvals.store.create(_request("r2"))
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    problems: list[str] = []
    try:
        with uvicorn_server(app) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page()
                page.on("pageerror", lambda exc: problems.append(str(exc)))
                expect.set_options(timeout=WAIT_MS)
                page.goto(f"{base}/approvals?token=bob-token")
                card = page.locator(f"article.approval[data-request-id={first.id}]")
                expect(card.get_by_role("button", name="Approve")).to_be_disabled()
                expect(card.locator("[role=status]")).to_contain_text("you may not approve")
                expect(card).not_to_contain_text("hunter2")
                other = page.locator(f"article.approval[data-request-id={second.id}]")
                other.get_by_role("button", name="Deny").click()
                expect(other.locator("[role=status] [data-status]")).to_have_text("denied")

                page.evaluate("sessionStorage.clear()")
                page.goto(f"{base}/approvals?token=ops-token")
                card = page.locator(f"article.approval[data-request-id={first.id}]")
                expect(card).to_contain_text("hunter2-acct")
                card.get_by_role("button", name="Approve").click()
                expect(card.locator("[role=status] [data-status]")).to_have_text("approved")
            finally:
                browser.close()
    finally:
        app.state.runner.close()
        rt.close()
    assert problems == []
    decided = {r.id: (r.status, r.decided_by) for r in rt.approvals.store.list(limit=10)}
    assert decided == {first.id: ("approved", "ops"), second.id: ("denied", "bob")}
