"""The console's routes through FastAPI's TestClient: page shell, assets, headers, confinement."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from actionspace import Principal, Runtime
from actionspace.service import create_app
from actionspace.service.console import CONSOLE_PAGES, STATIC_DIR

TOKENS = {"t": Principal(id="admin", scopes=("*",))}


@pytest.fixture
def client() -> Iterator[TestClient]:
    rt = Runtime("memory://", recover_on_start=False)
    app = create_app(rt, tokens=TOKENS)
    try:
        with TestClient(app) as c:
            yield c
    finally:
        app.state.runner.close()
        rt.close()


@pytest.mark.parametrize(
    "path", ["/", "/runs", "/runs/run_abc", "/approvals", "/tools", "/tools/create_event"]
)
def test_every_console_page_answers_with_the_html_shell_without_a_token(
    client: TestClient, path: str
) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert '<main id="view"' in response.text
    assert '<script type="module" src="/static/console.js"></script>' in response.text


def test_pages_forbid_scripts_from_other_origins_and_never_leak_the_token_as_referrer(
    client: TestClient,
) -> None:
    headers = client.get("/approvals?token=secret").headers
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert headers["referrer-policy"] == "no-referrer"
    assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize(
    ("name", "media"),
    [
        ("console.js", "text/javascript"),
        ("dag.js", "text/javascript"),
        ("console.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ],
)
def test_static_assets_are_served_with_their_media_type(client: TestClient, name: str, media: str) -> None:
    response = client.get(f"/static/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith(media)
    assert response.content == (STATIC_DIR / name).read_bytes()


@pytest.mark.parametrize(
    "path", ["/static/nope.js", "/static/..%2Fconsole.py", "/static/%2E%2E%2F__init__.py", "/static/"]
)
def test_nothing_outside_the_static_assets_is_served(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert "console_router" not in response.text


def test_the_shell_loads_nothing_from_another_origin() -> None:
    shell = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    scripts = {p.name: p.read_text(encoding="utf-8") for p in STATIC_DIR.glob("*.js")}
    assert {"console.js", "core.js", "approvals.js", "runs.js", "dag.js", "tools.js"} <= set(scripts)
    style = (STATIC_DIR / "console.css").read_text(encoding="utf-8")
    for text in (shell, style, *scripts.values()):
        assert not re.search(r"(src|href)\s*=\s*\"(https?:)?//", text)
        assert "@import" not in text and "url(http" not in text
    for name, script in scripts.items():
        assert "innerHTML" not in script, name
        for imported in re.findall(r'from "([^"]+)"', script):
            assert imported.startswith("./") and (STATIC_DIR / imported[2:]).is_file(), (name, imported)
    assert "<script>" not in shell and "<style" not in shell and " style=" not in shell


def test_the_api_and_the_console_share_one_app_and_the_api_still_needs_a_token(client: TestClient) -> None:
    assert client.get("/api/runs").status_code == 401
    assert client.get("/api/runs", headers={"Authorization": "Bearer t"}).status_code == 200
    assert client.get("/api/health").json()["status"] == "ok"


def test_the_page_paths_are_left_out_of_the_openapi_schema(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert all(p.startswith("/api/") for p in paths)
    assert set(CONSOLE_PAGES) & set(paths) == set()
