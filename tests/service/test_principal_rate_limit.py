"""A request quota per principal: opt-in, answered 429 ``rate_limited`` with ``Retry-After``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace import Principal, Runtime
from actionspace.cli import _mount
from actionspace.cli import app as cli_app
from actionspace.errors import ConfigurationError
from actionspace.service import RunnerConfig, create_app
from actionspace.service.auth import GUESSES_PER_MINUTE, Auth
from actionspace.service.cli import prepare
from actionspace.service.proxies import TrustedProxies
from actionspace.service.quotas import RateLimit
from tests.service.apptools import TOKENS, bearer

AGENT = bearer("agent-token")
READER = bearer("reader-token")


@contextmanager
def _app(**options: object) -> Iterator[FastAPI]:
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    try:
        app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05), **options)  # type: ignore[arg-type]
        try:
            yield app
        finally:
            app.state.runner.close()
    finally:
        rt.close()


def test_without_a_rate_limit_a_good_token_is_never_refused_for_asking_often() -> None:
    with _app() as app:
        client = TestClient(app)
        for _ in range(GUESSES_PER_MINUTE + 20):
            assert client.get("/api/catalog", headers=READER).status_code == 200


def test_a_principal_past_its_rate_limit_gets_429_rate_limited_with_retry_after_and_others_go_on() -> None:
    """An hour's allowance: nothing comes back while the test runs, however slow the machine."""
    with _app(rate_limit="3/hour") as app:
        client = TestClient(app)
        for path in ("/api/runs", "/api/catalog", "/api/runs"):  # every route counts, whatever its scope
            assert client.get(path, headers=AGENT).status_code in (200, 403)
        refused = client.get("/api/runs", headers=AGENT)
        assert refused.status_code == 429, refused.text
        assert refused.json() == {
            "error": {"category": "rate_limited", "message": refused.json()["error"]["message"]}
        }
        assert "3/hour" in refused.json()["error"]["message"]
        assert 1 <= int(refused.headers["Retry-After"]) <= 1200  # one request back every 20 minutes
        assert refused.headers["x-content-type-options"] == "nosniff"
        posted = client.post("/api/runs", json={"calls": []}, headers=AGENT)
        assert posted.status_code == 429 and posted.json()["error"]["category"] == "rate_limited"
        for _ in range(3):  # another principal has an allowance of its own
            assert client.get("/api/runs", headers=READER).status_code == 200
        assert client.get("/api/runs", headers=READER).status_code == 429
        assert client.get("/api/health").status_code == 200  # no token, no principal, no quota
        # the same envelope as the limit on unknown tokens
        app.state.auth = Auth(TOKENS, clock=lambda: 0.0)
        for n in range(GUESSES_PER_MINUTE):
            client.get("/api/runs", headers=bearer(f"g{n}"))
        guessed = client.get("/api/runs", headers=AGENT)
        assert guessed.status_code == 429 and set(guessed.json()["error"]) == set(refused.json()["error"])


def test_a_post_past_the_rate_limit_is_refused_before_its_body_is_read_and_counted_once() -> None:
    with _app(rate_limit="2/hour") as app:
        body = json.dumps({"calls": []}).encode()
        read = 0

        async def receive() -> dict[str, Any]:
            nonlocal read
            read += len(body)
            return {"type": "http.request", "body": body, "more_body": False}

        sent: list[MutableMapping[str, Any]] = []

        async def send(message: MutableMapping[str, Any]) -> None:
            sent.append(message)

        headers = [(b"authorization", b"Bearer reader-token"), (b"content-type", b"application/json")]
        headers.append((b"content-length", str(len(body)).encode()))
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/api/runs", "raw_path": b"/api/runs", "root_path": "",
            "query_string": b"", "headers": headers, "client": ("192.0.2.1", 1), "server": ("t", 80),
        }  # fmt: skip
        statuses = []
        for _ in range(3):
            sent.clear()
            asyncio.run(app(dict(scope), receive, send))
            statuses.append(next(m["status"] for m in sent if m["type"] == "http.response.start"))
        # a reader may not start runs (403), yet each request counts once: the third is the one refused
        assert statuses == [403, 403, 429]
        assert read == 2 * len(body)


def test_the_allowance_comes_back_at_its_rate() -> None:
    now = [0.0]
    auth = Auth(
        {"tok-0000000000": Principal(id="p", tenant="t")},
        rate_limit=RateLimit(requests=2),
        clock=lambda: now[0],
    )
    other = Auth(
        {"tok-0000000000": Principal(id="p", tenant="u")},
        rate_limit=RateLimit(requests=2),
        clock=lambda: now[0],
    )
    for _ in range(2):
        auth.authenticate("tok-0000000000", "c")
    with pytest.raises(HTTPException) as refused:
        auth.authenticate("tok-0000000000", "c")
    assert refused.value.status_code == 429
    assert refused.value.headers == {"Retry-After": "30"}  # one request back every 30 s
    now[0] += 30
    auth.authenticate("tok-0000000000", "c")
    other.authenticate("tok-0000000000", "c")


@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(1, 10**9 - 1),
    unit=st.sampled_from(["second", "minute", "hour", "Minute", "HOUR"]),
    pad=st.sampled_from(["", " ", "  "]),
)
def test_a_rate_limit_reads_n_per_unit(n: int, unit: str, pad: str) -> None:
    limit = RateLimit.parse(f"{pad}{n}{pad}/{pad}{unit}{pad}")
    assert limit.requests == n
    assert limit.per_s == {"second": 1.0, "minute": 60.0, "hour": 3600.0}[unit.lower()]
    assert RateLimit.parse(str(limit)) == limit


@pytest.mark.parametrize(
    "bad", ["0/minute", "-1/minute", "10", "10/day", "ten/minute", "1.5/minute", "/minute", ""]
)
def test_a_rate_limit_in_another_form_is_a_configuration_error(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="rate limit"):
        RateLimit.parse(bad)
    with pytest.raises(ConfigurationError, match="rate limit"), _app(rate_limit=bad):
        pass


def test_serve_takes_both_options_and_lists_them_in_its_help(tmp_path: Path) -> None:
    served = prepare(
        store=f"sqlite://{tmp_path / 's.db'}",
        host="127.0.0.1",
        port=8765,
        token="admin-token-0000",
        demo=False,
        trusted_proxies=["10.0.0.0/8"],
        rate_limit="1/hour",
    )
    with served.stack:
        client = TestClient(served.app, client=("10.0.0.9", 1))
        headers = {**bearer(served.token), "X-Forwarded-For": "203.0.113.5"}
        assert client.get("/api/runs", headers=headers).status_code == 200
        assert client.get("/api/runs", headers=headers).status_code == 429
        auth: Auth = served.app.state.auth
        assert auth.trusted_proxies == TrustedProxies.parse(["10.0.0.0/8"])
    _mount()
    runner = CliRunner()
    shown = runner.invoke(cli_app, ["serve", "--help"], terminal_width=200)
    assert "--trusted-proxy" in shown.output and "--rate-limit" in shown.output
    refused = runner.invoke(cli_app, ["serve", "--no-demo", "--store", "memory://", "--rate-limit", "lots"])
    assert refused.exit_code == 1 and "rate limit" in refused.output
    refused = runner.invoke(cli_app, ["serve", "--no-demo", "--store", "memory://", "--trusted-proxy", "x"])
    assert refused.exit_code == 1 and "trusted proxy" in refused.output
