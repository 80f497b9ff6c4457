"""A tool's schema is compiled from itself alone: a ``$ref`` that points outside it is refused when
the tool is registered, and nothing is fetched or read for it (a schema may come from anywhere: an
MCP server, an OpenAPI document, a benchmark's file)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.errors import ConfigurationError


@pytest.fixture
def served() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server answering every GET with a schema; the paths asked for."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps({"type": "integer"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def _add(rt: Runtime, schema: dict[str, Any]) -> None:
    rt.add_tool(name="t", input_schema=schema, fn=lambda **_: "ok", effect="none", description="A tool.")


def test_a_schema_referring_to_a_url_is_refused_and_nothing_is_fetched(served: tuple[str, list[str]]) -> None:
    base, asked = served
    schemas = [
        {"type": "object", "properties": {"n": {"$ref": f"{base}/n.json"}}},
        {"$id": f"{base}/root.json", "type": "object", "properties": {"n": {"$ref": "n.json"}}},
        {"type": "object", "properties": {"n": {"anyOf": [{"$ref": f"{base}/a.json"}, {"type": "string"}]}}},
    ]
    for schema in schemas:
        with pytest.raises(ConfigurationError, match="not a valid JSON Schema"):
            _add(Runtime("memory://"), schema)
    assert asked == []


def test_a_schema_referring_to_a_local_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    target = tmp_path / "n.json"
    target.write_text(json.dumps({"type": "integer"}))
    schema = {"type": "object", "properties": {"n": {"$ref": target.as_uri()}}}
    with pytest.raises(ConfigurationError, match="not a valid JSON Schema"):
        _add(Runtime("memory://"), schema)


def test_references_inside_the_schema_and_the_standard_meta_schemas_still_work() -> None:
    rt = Runtime("memory://")
    _add(
        rt,
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$defs": {"n": {"type": "integer"}},
            "type": "object",
            "properties": {"n": {"$ref": "#/$defs/n"}},
        },
    )
    assert rt.call({"name": "t", "arguments": {"n": 3}}).status == "ok"
    refused = rt.call({"name": "t", "arguments": {"n": "three"}})
    assert refused.error is not None and refused.error.category == "invalid_arguments"
