"""A ledger key names an action without telling another tenant whether it exists.

The key of ``POST /api/ledger/{key}/resolve`` is a digest of (run, node, tool, arguments): a token
that guesses an action can compute its key and ask. The answers (status, body, headers) and the
work done (the trace read) for another tenant's key must be those for a key of no entry, for every
token and body, or the route confirms the guess.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Principal
from tests.pg import STORES, store_url
from tests.service.apptools import TOKENS, bearer, served

_TOKENS = {
    **TOKENS,
    "tenant-a": Principal(id="ann", tenant="a", scopes=("runs:*", "ledger:*", "external:*")),
    "b-resolver": Principal(id="bob", tenant="b", scopes=("ledger:resolve",)),
    "b-both": Principal(id="ben", tenant="b", scopes=("ledger:read", "ledger:resolve")),
    "b-reader": Principal(id="bea", tenant="b", scopes=("ledger:read",)),
    "untenanted": Principal(id="uma", scopes=("ledger:resolve",)),
}
MISSING = "as1_" + "0" * 32
BODIES: list[Any] = [
    {"outcome": "committed"},
    {"outcome": "not_committed", "note": "n"},
    {"outcome": "x"},
    None,
]


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


def _foreign_key(client: TestClient, app: Any, rt: Any) -> str:
    calls = [{"name": "post_note", "arguments": {"text": "pay the rent"}}]
    started = client.post("/api/runs", headers=bearer("tenant-a"), json={"run_id": "a_run", "calls": calls})
    assert started.status_code == 202
    app.state.runner.wait("a_run", timeout=30)
    entries = rt.ledger.list(state="unknown_commit", limit=10)
    assert len(entries) == 1 and len(entries[0].key) == len(MISSING)
    return str(entries[0].key)


def _seen(answer: Any, key: str) -> tuple[int, str, list[tuple[str, str]]]:
    headers = sorted((k, v) for k, v in answer.headers.items() if k != "date")
    return answer.status_code, answer.text.replace(key, "KEY"), headers


def test_another_tenants_key_is_answered_as_a_key_of_no_entry(url: str) -> None:
    with served(url, tokens=_TOKENS) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        key = _foreign_key(client, app, rt)
        store: Any = rt.trace
        reads: Counter[str] = Counter()
        originals = {name: getattr(store, name) for name in ("events", "heads") if hasattr(store, name)}

        inside: list[str] = []

        def counted(name: str) -> Any:
            def read(run_id: str) -> Any:
                if not inside:  # the memory store's heads reads its events: one read, of the head
                    reads[name] += 1
                inside.append(name)
                try:
                    return originals[name](run_id)
                finally:
                    inside.pop()

            return read

        for name in originals:
            setattr(store, name, counted(name))
        try:
            for token in ("b-resolver", "b-both", "b-reader", "untenanted", "nobody"):
                for body in BODIES:
                    answers = []
                    work = []
                    for asked in (key, MISSING):
                        reads.clear()
                        got = client.post(f"/api/ledger/{asked}/resolve", headers=bearer(token), json=body)
                        answers.append(_seen(got, asked))
                        work.append(dict(reads))
                    assert answers[0] == answers[1], (token, body, answers)
                    assert answers[0][0] in (401, 403, 404, 422), answers[0]
                    assert json.loads(answers[0][1])["error"]["category"]
                    assert work[0] == work[1], (token, body, work)  # the same reads, of the same cost
                    assert "events" not in work[0], work  # a tenant check reads a run's head only
        finally:
            for name, read in originals.items():
                setattr(store, name, read)
        entry = rt.ledger.get(key)
        assert entry is not None and entry.state == "unknown_commit"  # nobody of tenant b resolved it
        own = client.post(f"/api/ledger/{key}/resolve", headers=bearer("tenant-a"), json=BODIES[0])
        assert own.status_code == 200 and own.json()["state"] == "committed"


def test_any_key_is_a_typed_answer_never_a_server_error(url: str) -> None:
    with served(url, tokens=_TOKENS) as (_client, rt, _world, _signalling, app):
        client = TestClient(app, raise_server_exceptions=False)
        _foreign_key(client, app, rt)

        @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(st.text(min_size=1, max_size=80))
        def ask(key: str) -> None:
            quoted = quote(key.encode("utf-8", "surrogatepass"), safe="")
            got = client.post(f"/api/ledger/{quoted}/resolve", headers=bearer("b-both"), json=BODIES[0])
            assert got.status_code in (404, 405), (key, got.status_code, got.text)
            assert got.json()["error"]["category"] in ("invalid_arguments",), got.text

        ask()
