"""``GET /api/metrics`` names the fields a tool's rejected calls failed on by JSON pointer. Below an
argument's name a pointer is built from the call's values (an object's keys, as the model wrote
them), so in a run holding data the token may not read it shows only the argument's name, as the
run's redacted events do; a token cleared for the data sees the whole pointer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Labels, Principal, Runtime
from actionspace.service import create_app

TOKENS = {
    "reader-token": Principal(id="reader", scopes=("runs:read", "metrics:read")),
    "tenant-admin-token": Principal(id="boss", scopes=("admin:all", "metrics:read", "runs:read")),
    "cleared-token": Principal(id="cleared", scopes=("runs:read", "metrics:read", "labels:secret")),
}


def _runtime(secret_value: str) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return secret_value

    @rt.tool(effect="none")
    def tally(counts: dict[str, int]) -> str:
        """Count things by name.

        Args:
            counts: Name to count.
        """
        return "ok"

    return rt


@contextmanager
def _client(rt: Runtime) -> Iterator[TestClient]:
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        app.state.runner.close()
        rt.close()


def _metrics(client: TestClient, token: str) -> dict[str, Any]:
    answer = client.get("/api/metrics", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200, answer.text
    view: dict[str, Any] = answer.json()
    return view


def _tally(view: dict[str, Any]) -> dict[str, Any]:
    return next(t for t in view["tools"] if t["tool"] == "tally")


_CHARS = st.characters(codec="utf-8", exclude_characters="/~\x00")
_KEYS = st.text(_CHARS, max_size=16).map(lambda k: f"pw-{k}")
"""Keys a model might build from what it read (``/`` and ``~`` are escaped in a pointer, and a
NUL is stored replaced: none of them here)."""


@settings(
    max_examples=15,
    deadline=timedelta(seconds=60),  # a hang, not a slow machine, is what fails
    suppress_health_check=[HealthCheck.too_slow],
)
@given(secret=_KEYS)
def test_a_pointer_built_from_a_secret_reaches_only_a_token_cleared_for_it(secret: str) -> None:
    rt = _runtime(secret)
    secret_run, plain_run = rt.new_run(), rt.new_run()
    assert rt.call({"name": "read_password", "arguments": {}}, run_id=secret_run).error is None
    # the model turns what it read into a key of an object argument; the value is of the wrong type
    bad = {"name": "tally", "arguments": {"counts": {secret: "many"}}}
    assert rt.call(bad, run_id=secret_run).error is not None
    assert rt.call({"name": "tally", "arguments": {"counts": {"apples": "many"}}}, run_id=plain_run).error
    with _client(rt) as client:
        for token in ("reader-token", "tenant-admin-token"):
            view = _metrics(client, token)
            assert secret not in json.dumps(view, ensure_ascii=False)
            assert json.dumps(secret) not in json.dumps(view)
            # the argument's name stays, as in the run's redacted events; a readable run keeps it all
            assert _tally(view)["rejects_by_field"] == {"/counts": 1, "/counts/apples": 1}
            assert _tally(view)["rejects"] == 2
        cleared = _tally(_metrics(client, "cleared-token"))
        assert cleared["rejects_by_field"] == {f"/counts/{secret}": 1, "/counts/apples": 1}
