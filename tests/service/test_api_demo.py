"""``actionspace serve``'s default: the demo's store and tools, so a pending demo call can be approved."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient

from actionspace.demo.followup import PartnerChannel, channel_path, leave_pending
from actionspace.demo.scenario import PRINCIPAL
from actionspace.service.cli import prepare
from tests.service.apptools import bearer

EVENT = {"id": "evt-1", "title": "Design review", "start_utc": "2026-12-08T07:00:00Z"}


def test_serve_shows_the_demo_follow_up_and_approving_it_posts_once(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    followup = leave_pending(store, after_run="run_demo", event=EVENT, principal=PRINCIPAL)
    assert followup is not None and followup.category == "needs_approval" and followup.request_id
    served = prepare(store=store, host="127.0.0.1", port=8765, token="t0ken", tools=(), demo=True)
    with served.stack:
        assert served.url == "http://127.0.0.1:8765/?token=t0ken"
        client = TestClient(served.app)
        auth = bearer(served.token)
        names = {t["name"] for t in client.get("/api/catalog", headers=auth).json()}
        assert {"share_with_partner", "create_event", "get_event"} <= names
        runs = {r["run_id"]: r for r in client.get("/api/runs", headers=auth).json()}
        assert runs["run_demo-followup"]["status"] == "waiting_approval"
        pending = client.get("/api/approvals", headers=auth).json()
        assert [p["request_id"] for p in pending] == [followup.request_id]
        assert pending[0]["preview"]["arguments"]["recipient"] == "events@partner-agency.example"
        approved = client.post(f"/api/approvals/{followup.request_id}/approve", headers=auth)
        assert approved.status_code == 200
        resumed = served.app.state.runner.resumed(followup.request_id, "run_demo-followup")
        assert resumed is not None and resumed.result(timeout=20) == "ok"
    channel = PartnerChannel(channel_path(store))
    try:
        posts = channel.posts()
        assert [(p["event_id"], p["recipient"]) for p in posts] == [
            ("evt-1", "events@partner-agency.example")
        ]
    finally:
        channel.close()


def test_serve_without_a_token_makes_one_and_loads_extra_tools(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'plain.db'}"
    served = prepare(
        store=store,
        host="0.0.0.0",
        port=9000,
        token=None,
        tools=("tests.service.apptools:EXTRA_TOOLS",),
        demo=False,
    )
    with served.stack:
        assert served.url.startswith("http://127.0.0.1:9000/?token=") and len(served.token) >= 32
        client = TestClient(served.app)
        names = [t["name"] for t in client.get("/api/catalog", headers=bearer(served.token)).json()]
        assert names == ["echo"]


def test_the_printed_console_url_carries_any_token_and_host_exactly(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'plain.db'}"
    token = "k3y+with/base64=&and#more %chars"  # what `openssl rand -base64` and people write
    for host, netloc in (("127.0.0.1", "127.0.0.1:8765"), ("::1", "[::1]:8765"), ("::", "127.0.0.1:8765")):
        served = prepare(store=store, host=host, port=8765, token=token, tools=(), demo=False)
        with served.stack:
            url = urlsplit(served.url)
            assert url.netloc == netloc and url.fragment == ""
            assert parse_qs(url.query) == {"token": [token]}  # as the page's URLSearchParams reads it
            assert TestClient(served.app).get("/api/runs", headers=bearer(served.token)).status_code == 200
