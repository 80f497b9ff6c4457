"""The console end to end in headless Chromium: a person approves a held call and the run completes.

A real uvicorn server serves ``create_app`` on a free port; Debian's ``chromium`` (installed by
``scripts/install-chromium.sh``) is driven by Playwright through its executable path. Screenshots
of every page go to ``test-artifacts/console/``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from actionspace import Principal, Runtime
from actionspace.demo.followup import PartnerChannel, channel_path
from actionspace.demo.runner import run_scenario
from actionspace.service import RunnerConfig, create_app
from actionspace.service.cli import prepare
from tests.service.apptools import uvicorn_server

if TYPE_CHECKING:
    from playwright.sync_api import Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
TOKEN = "console-test-token"
WAIT_MS = 20_000
"""Deadline of every wait on the page (the pages poll the API every 1-3 s)."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason="needs Debian's chromium at /usr/bin/chromium: scripts/install-chromium.sh",
    ),
]


@dataclass
class World:
    """What the tools really did."""

    reservations: list[dict[str, Any]] = field(default_factory=list)
    invitations: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _runtime(world: World) -> Runtime:
    rt = Runtime("memory://", principal=Principal(id="agent", scopes=("*",)), recover_on_start=False)

    @rt.tool(effect="read")
    def find_room(floor: int) -> dict[str, Any]:
        """Free meeting rooms on a floor.

        Args:
            floor: Floor number.
        """
        return {"floor": floor, "rooms": ["Fjord", "Delta"]}

    @rt.tool(effect="write", requires_approval=True, writes=["room:{room}"], idempotency="native")
    def reserve_room(room: str, hours: int, idempotency_key: str) -> dict[str, Any]:
        """Reserve a meeting room.

        Args:
            room: Room name.
            hours: Length of the booking in hours.
        """
        with world.lock:
            booking = {"room": room, "hours": hours, "key": idempotency_key}
            world.reservations.append(booking)
        return booking

    @rt.tool(effect="external", batch="per_item", requires_approval=True, writes=["mailbox:{id}"])
    def invite(items: list[dict[str, str]]) -> dict[str, Any]:
        """Invite people by email, one item each.

        Args:
            items: People to invite, each with an id and an email address.
        """
        with world.lock:
            world.invitations.extend(i["id"] for i in items)
        return {"invited": [i["id"] for i in items]}

    return rt


@dataclass
class Served:
    base: str
    world: World
    rt: Runtime


@contextmanager
def _chromium(problems: list[str]) -> Iterator[Page]:
    """A page of headless Debian chromium; page errors and console errors land in ``problems``."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
            page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
            expect.set_options(timeout=WAIT_MS)
            try:
                yield page
            except Exception:
                page.screenshot(path=_artifacts() / "failure.png", full_page=True)
                raise
        finally:
            browser.close()


@pytest.fixture
def served() -> Iterator[Served]:
    world = World()
    rt = _runtime(world)
    app = create_app(
        rt, tokens={TOKEN: Principal(id="reviewer", scopes=("*",))}, runner=RunnerConfig(approval_poll_s=0.1)
    )
    try:
        with uvicorn_server(app) as base:
            yield Served(base, world, rt)
    finally:
        rt.close()


def _start(base: str, body: dict[str, Any]) -> str:
    response = httpx.post(
        f"{base}/api/runs", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert response.status_code == 202, response.text
    run_id: str = response.json()["run_id"]
    return run_id


def _artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ignore = ARTIFACTS.parent / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    return ARTIFACTS


def test_a_person_approves_a_held_call_in_the_browser_and_the_run_completes(served: Served) -> None:
    from playwright.sync_api import expect

    shots = _artifacts()
    call_run = _start(
        served.base,
        {
            "run_id": "r-approve",
            "calls": [
                {"name": "find_room", "arguments": {"floor": 3}},
                {"name": "reserve_room", "arguments": {"room": "Fjord", "hours": 2}},
            ],
        },
    )
    plan_run = _start(
        served.base,
        {
            "run_id": "r-plan",
            "plan": {
                "nodes": [
                    {"id": "rooms", "tool": "find_room", "arguments": {"floor": 4}},
                    {
                        "id": "mail",
                        "tool": "invite",
                        "arguments": {
                            "items": [
                                {"id": "ana", "email": "ana@example.org"},
                                {"id": "bo", "email": "bo@example.org"},
                            ]
                        },
                        "depends_on": ["rooms"],
                    },
                    {"id": "again", "tool": "find_room", "arguments": {"floor": 5}, "depends_on": ["mail"]},
                ]
            },
        },
    )
    problems: list[str] = []
    with _chromium(problems) as page:
        page.goto(f"{served.base}/?token={TOKEN}")
        expect(page.get_by_role("heading", name="Waiting for a decision")).to_be_visible()
        assert "token" not in page.url
        expect(page.locator("section.card").first.locator("tbody tr")).to_have_count(2)
        page.screenshot(path=shots / "overview.png", full_page=True)

        page.locator("[data-nav=approvals]").click()
        cards = page.locator("article.approval")
        expect(cards).to_have_count(2)
        held = cards.filter(has_text="reserve_room")
        room = held.locator("[data-argument=room]")
        expect(room.locator(".value")).to_have_text("Fjord")
        expect(room.locator("[data-provenance]")).to_have_text("inferred by the model")
        expect(held.locator(".effects")).to_contain_text("room:Fjord")
        batch = cards.filter(has_text="invite")
        expect(batch.locator("[data-item]")).to_have_count(2)
        expect(batch.locator("[data-item=bo]")).to_contain_text("bo@example.org")
        expect(batch.locator("[data-item=ana]")).to_contain_text("mailbox:ana")
        assert served.world.reservations == [], "the held call ran before anyone approved it"
        page.screenshot(path=shots / "approvals.png", full_page=True)

        held.get_by_label("Reason").fill("room is free")
        held.get_by_role("button", name="Approve").click()
        expect(held.locator("[role=status] [data-status]")).to_have_text("approved")
        batch.get_by_role("button", name="Deny").click()
        expect(batch.locator("[role=status] [data-status]")).to_have_text("denied")
        page.screenshot(path=shots / "approvals-decided.png", full_page=True)

        held.get_by_role("link", name="Follow the run →").click()
        page.wait_for_url(f"**/runs/{call_run}")
        status = page.locator("#run-status")
        expect(status).to_have_attribute("data-finished", "true")
        expect(status).to_have_attribute("data-status", "ok")
        timeline = page.locator("table.timeline")
        decided = timeline.locator("tr[data-kind=approval_decided]")
        expect(decided.filter(has_text="approved").filter(has_text="by reviewer")).to_have_count(1)
        expect(decided.filter(has_text="consumed")).to_have_count(1)
        expect(timeline.locator("tr[data-kind=run_finished]")).to_have_count(1)
        page.screenshot(path=shots / "run.png", full_page=True)

        page.goto(f"{served.base}/runs/{plan_run}")
        expect(page.locator("#run-status")).to_have_attribute("data-finished", "true")
        dag = page.locator("svg.dag")
        expect(dag.locator("[data-node=rooms]")).to_have_attribute("data-status", "ok")
        expect(dag.locator("[data-node=mail]")).to_have_attribute("data-status", "denied")
        expect(dag.locator("[data-node=again]")).to_have_attribute("data-status", "blocked")
        expect(dag.locator("[data-edge]")).to_have_count(2)
        page.screenshot(path=shots / "run-plan.png", full_page=True)

        page.locator("[data-nav=runs]").click()
        expect(page.locator(f"tr[data-run-id={call_run}]")).to_contain_text("ok")
        expect(page.locator(f"tr[data-run-id={plan_run}]")).to_be_visible()
        page.screenshot(path=shots / "runs.png", full_page=True)

        page.locator("[data-nav=tools]").click()
        row = page.locator("tr[data-tool=reserve_room]")
        expect(row).to_contain_text("write")
        row.get_by_role("link", name="reserve_room").click()
        expect(page.get_by_role("heading", name="Input schema")).to_be_visible()
        expect(page.locator(".summary").first).to_contain_text("always")
        page.screenshot(path=shots / "tool.png", full_page=True)
        page.goto(f"{served.base}/tools")
        calls = page.locator("tr[data-tool=find_room] td.num").first
        expect(calls).to_have_text("2")  # node "again" was blocked: it never ran
        page.screenshot(path=shots / "tools.png", full_page=True)

    assert [(r["room"], r["hours"]) for r in served.world.reservations] == [("Fjord", 2)]
    assert served.world.invitations == []
    assert problems == []
    for name in ("overview", "approvals", "approvals-decided", "run", "run-plan", "runs", "tools", "tool"):
        assert (shots / f"{name}.png").stat().st_size > 10_000


def test_after_the_demo_the_console_shows_its_runs_and_approving_its_held_share_posts_it_once(
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    shots = _artifacts()
    store = f"sqlite:///{tmp_path / 'store.db'}"
    outcome = run_scenario(1, tmp_path / "calendar", store=store)  # what `actionspace demo` runs first
    assert outcome.passed, outcome.error
    calendar_run = outcome.report["run_id"]
    followup_run = f"{calendar_run}-followup"
    served = prepare(store=store, host="127.0.0.1", port=0, token=TOKEN)  # what `actionspace serve` builds
    problems: list[str] = []
    with served.stack, uvicorn_server(served.app) as base, _chromium(problems) as page:
        page.goto(f"{base}/runs")  # no token yet: the console asks for one
        page.get_by_label("API token").fill("not-the-token")
        page.get_by_role("button", name="Use token").click()
        expect(page.locator("#token-error")).to_contain_text("not accepted")
        page.get_by_label("API token").fill(TOKEN)
        page.get_by_role("button", name="Use token").click()
        expect(page.locator(f"tr[data-run-id={calendar_run}]")).to_contain_text("ok")
        expect(page.locator(f"tr[data-run-id={followup_run}]")).to_contain_text("waiting_approval")
        page.locator("[data-nav=approvals]").click()
        card = page.locator("article.approval").filter(has_text="share_with_partner")
        expect(card).to_have_count(1)
        recipient = card.locator("[data-argument=recipient]")
        expect(recipient.locator("[data-provenance]")).to_have_text("inferred by the model")
        expect(card.locator("[data-argument=event_id] [data-provenance]")).to_have_text("from a tool result")
        page.screenshot(path=shots / "demo-approvals.png", full_page=True)

        card.get_by_role("button", name="Approve").click()
        expect(card.locator("[role=status] [data-status]")).to_have_text("approved")
        card.get_by_role("link", name="Follow the run →").click()
        page.wait_for_url(f"**/runs/{followup_run}")
        timeline = page.locator("table.timeline")
        expect(timeline.locator("tr[data-kind=observation]").filter(has_text="ok")).to_have_count(1)
        expect(timeline.locator("tr[data-kind=dispatched]")).to_have_count(1)
        page.screenshot(path=shots / "demo-run.png", full_page=True)

        page.goto(f"{base}/runs/{calendar_run}")
        expect(page.locator("#run-status")).to_have_attribute("data-status", "ok")
        expect(page.locator("tr[data-kind=observation]")).to_have_count(len(outcome.report["steps"]))
        page.screenshot(path=shots / "demo-calendar-run.png", full_page=True)

    channel = PartnerChannel(channel_path(store))
    try:
        [post] = channel.posts()
    finally:
        channel.close()
    assert post["event_id"] == outcome.report["event"]["id"]
    # The wrong token's 401 is logged by the browser itself; nothing else may be.
    assert [p for p in problems if "status of 401" not in p] == []
