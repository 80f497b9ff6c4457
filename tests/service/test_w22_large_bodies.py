"""A large JSON body checked at the edge, against a real uvicorn server: the others are still served.

The edge reads a JSON body whole to refuse what no route may see (NaN, a member named twice, deep
nesting); on 16 MiB of small objects that takes seconds of Python. Done on the event loop, every
other connection (a health check, a person approving a call) waits for it, and a client repeating
such bodies holds the whole server.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
import pytest

from actionspace import Principal, Runtime
from actionspace.service import RunnerConfig, create_app, limits
from tests.service.apptools import TOKENS, bearer, uvicorn_server


def test_while_a_large_body_is_checked_the_server_answers_other_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checking, answered = threading.Event(), threading.Event()
    real = limits.json_problem

    def slow_check(body: bytes, **options: Any) -> str | None:
        """The edge's check, held until another client was answered (or 10 s passed): it stands
        for a check of many megabytes, without spending their seconds."""
        checking.set()
        answered.wait(10)
        return real(body, **options)

    monkeypatch.setattr(limits, "json_problem", slow_check)
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    body = json.dumps({"calls": [{"name": "lookup", "arguments": {"city": "x" * 200_000}}], "run_id": "big"})
    posted: list[httpx.Response] = []
    try:
        with uvicorn_server(app) as base:

            def post() -> None:
                with httpx.Client(base_url=base, timeout=30) as client:
                    headers = {**bearer("agent-token"), "content-type": "application/json"}
                    posted.append(client.post("/api/runs", content=body, headers=headers))

            poster = threading.Thread(target=post)
            poster.start()
            try:
                assert checking.wait(10), "the body never reached the edge's check"
                try:
                    health = httpx.get(f"{base}/api/health", timeout=5).status_code
                except httpx.TimeoutException:
                    health = None
                answered.set()
            finally:
                answered.set()
                poster.join(timeout=30)
            assert health == 200, "no other client was answered while one body was checked"
            assert posted and posted[0].status_code == 202, posted
    finally:
        app.state.runner.close()
        rt.close()


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"calls": [' + b"1," * 40_000 + b'NaN], "run_id": "r"}', "NaN"),
        (b'{"calls": [' + b'{"a": 1},' * 20_000 + b'{"a": 1, "a": 2}]}', "twice"),
        (b'{"calls": [' + b"[" * 300 + b"]" * 300 + b"," + b"0," * 40_000 + b"0]}", "deeper"),
    ],
)
def test_a_large_body_is_still_refused_for_what_a_small_one_is(body: bytes, problem: str) -> None:
    """Past the size checked off the event loop, the edge refuses what it refuses in a small body."""
    assert len(body) > 64 * 1024
    rt = Runtime("memory://", principal=Principal(id="svc", scopes=("read:*",)), recover_on_start=False)
    app = create_app(rt, tokens=TOKENS, runner=RunnerConfig(approval_poll_s=0.05))
    try:
        with uvicorn_server(app) as base, httpx.Client(base_url=base, timeout=30) as client:
            headers = {**bearer("agent-token"), "content-type": "application/json"}
            answer = client.post("/api/runs", content=body, headers=headers)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["category"] == "invalid_arguments"
            assert problem in answer.json()["error"]["message"]
            assert rt.trace.runs(limit=10) == []
    finally:
        app.state.runner.close()
        rt.close()
