"""A server's tool listing, however broken, never breaks the listing of its other tools.

A tool whose name, schema or annotations cannot be used, or whose name another tool holds, is
skipped (``toolset.skipped`` says why) and the rest register; a tool that changes into an unusable
definition stops being callable under its old one, since the server no longer serves it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.adapters.mcp_client import McpToolset, StdioServer
from actionspace.catalog.functions import spec_from_function
from tests.text_strategies import wild_json

_OK = {"type": "object", "properties": {"a": {"type": "string"}}}
_BROKEN_SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"n": {"type": "nonsense"}}},
    {"type": "object", "required": "n"},
    {"type": "object", "properties": {"n": {"minLength": "three"}}},
    {"type": "object", "properties": {"n": {"pattern": "("}}},
    {"type": "object", "properties": {"n": {"type": "number", "maximum": float("inf")}}},  # 1e400 in JSON
    {"type": "object", "properties": {"n": {"type": "number", "minimum": float("nan")}}},
]


def _tool(name: str, input_schema: dict[str, Any] | None = None, **changes: Any) -> types.Tool:
    return types.Tool.model_validate(
        {"name": name, "description": "d", "input_schema": input_schema or _OK, **changes}
    )


@pytest.fixture
def listed() -> Iterator[tuple[Runtime, McpToolset]]:
    rt = Runtime("memory://", recover_on_start=False)
    toolset = McpToolset(StdioServer("unused", allowlisted=True))
    toolset._claim(rt)
    yield rt, toolset
    rt.close()
    toolset.close()


@pytest.mark.parametrize("schema", _BROKEN_SCHEMAS)
def test_a_tool_whose_schema_is_not_valid_json_schema_is_skipped_and_the_others_register(
    listed: tuple[Runtime, McpToolset], schema: dict[str, Any]
) -> None:
    rt, toolset = listed
    added, _ = toolset._sync([_tool("before"), _tool("broken", schema), _tool("after")])
    assert sorted(s.name for s in added) == ["after", "before"]
    assert "broken" in toolset.skipped
    assert sorted(s.key for s in rt.catalog.offerable()) == ["after@1", "before@1"]
    assert rt.call({"name": "broken", "arguments": {}}).error is not None


def test_a_tool_that_changes_into_an_unusable_definition_is_retired(
    listed: tuple[Runtime, McpToolset],
) -> None:
    rt, toolset = listed
    read_only = {"readOnlyHint": True, "openWorldHint": False}
    toolset._sync([_tool("t", annotations=read_only), _tool("other")])
    assert rt.catalog.get("t").effect == "read"
    _, retired = toolset._sync([_tool("t", _BROKEN_SCHEMAS[0]), _tool("other")])
    assert [s.key for s in retired] == ["t@1"]
    assert "t" in toolset.skipped
    assert sorted(toolset.specs()) == ["other"]
    assert [s.key for s in rt.catalog.offerable()] == ["other@1"]
    # Once the server serves a usable definition again, it is registered as a new version.
    added, _ = toolset._sync([_tool("t"), _tool("other")])
    assert [s.name for s in added] == ["t"] and added[0].version != "1"
    assert "t" not in toolset.skipped


def _send_email(to: str) -> str:
    """Send an email (the runtime's own tool)."""
    return "sent"


def test_a_server_tool_named_like_another_tool_never_takes_its_place(
    listed: tuple[Runtime, McpToolset],
) -> None:
    rt, toolset = listed
    rt.register(spec_from_function(_send_email, name="send_email", version="2", effect="external"))
    read_only = {"readOnlyHint": True, "openWorldHint": False}
    added, _ = toolset._sync([_tool("send_email", annotations=read_only), _tool("other")])
    assert [s.key for s in added] == ["other@1"]
    assert "send_email" in toolset.skipped
    assert rt.catalog.get("send_email").key == "send_email@2"
    assert sorted(s.key for s in rt.catalog.offerable()) == ["other@1", "send_email@2"]


def test_a_listing_change_that_adds_a_taken_name_still_brings_the_other_tools_in_step(
    listed: tuple[Runtime, McpToolset],
) -> None:
    rt, toolset = listed
    rt.register(spec_from_function(_send_email, name="send_email", effect="external"))
    toolset._sync([_tool("a"), _tool("b")])
    added, retired = toolset._sync([_tool("send_email"), _tool("a", {"type": "object"})])
    assert [s.key for s in added] == ["a@2"]
    assert sorted(s.key for s in retired) == ["a@1", "b@1"]
    assert sorted(s.key for s in rt.catalog.offerable()) == ["a@2", "send_email@1"]


class _CountingHandler(BaseHTTPRequestHandler):
    """Serves a valid schema for any path and counts the requests."""

    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        body = json.dumps({"type": "string"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[str]:
    """A web server a hostile schema may point at; it records every fetch."""
    _CountingHandler.requests = []
    httpd = HTTPServer(("127.0.0.1", 0), _CountingHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join(10)


def test_a_schema_that_points_outside_itself_is_skipped_and_nothing_is_fetched(
    listed: tuple[Runtime, McpToolset], schema_host: str, tmp_path: Path
) -> None:
    """Listing a server's tools never makes this process read a URL or a local file."""
    _, toolset = listed
    local = tmp_path / "local.json"
    local.write_text(json.dumps({"type": "string", "enum": ["a secret"]}))
    outward: dict[str, dict[str, Any]] = {
        "remote_ref": {"type": "object", "properties": {"a": {"$ref": f"{schema_host}/a.json"}}},
        "remote_meta": {"$schema": f"{schema_host}/meta.json", "type": "object"},
        "remote_base": {
            "$id": f"{schema_host}/base/",
            "type": "object",
            "properties": {"a": {"$ref": "b.json"}},
        },
        "local_file": {"type": "object", "properties": {"a": {"$ref": local.as_uri()}}},
    }
    listing = [_tool(name, schema) for name, schema in outward.items()]
    listing.append(_tool("remote_output", output_schema={"$ref": f"{schema_host}/out.json"}))
    listing.append(_tool("inner", {"type": "object", "$defs": {"s": {"type": "string"}},
                                   "properties": {"a": {"$ref": "#/$defs/s"}}}))  # fmt: skip
    added, _ = toolset._sync(listing)
    assert [s.key for s in added] == ["inner@1"]
    assert set(toolset.skipped) == {*outward, "remote_output"}
    assert _CountingHandler.requests == []


def test_a_tool_whose_output_schema_is_not_valid_json_schema_is_skipped(
    listed: tuple[Runtime, McpToolset],
) -> None:
    """Its results could never be read, so a write would run and then fail: it is never offered."""
    _, toolset = listed
    write = {"readOnlyHint": False, "openWorldHint": False}
    bad_output = {"type": "object", "properties": {"n": {"type": "nonsense"}}}
    added, _ = toolset._sync([_tool("w", output_schema=bad_output, annotations=write), _tool("ok")])
    assert [s.key for s in added] == ["ok@1"]
    assert "w" in toolset.skipped


_schema_words = st.sampled_from(
    ["type", "properties", "required", "items", "object", "string", "integer", "nonsense", "$ref", "#",
     "minLength", "pattern", "(", "enum", "additionalProperties", "anyOf", "format", "date-time"]
)  # fmt: skip
_wire_text = st.text(max_size=12)
"""What a JSON text can carry (the SDK refuses a message with an unpaired surrogate escape)."""
_schemas = st.dictionaries(
    _schema_words, wild_json(_schema_words | _wire_text, max_leaves=8), max_size=4
).map(lambda extra: {"type": "object", **extra})
_names = st.sampled_from(["a", "b", "a b", "x@1", "", "ü/ç", "n" * 300]) | _wire_text


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(listing=st.lists(st.tuples(_names, _schemas), max_size=5))
def test_any_listing_registers_every_usable_tool_and_skips_the_rest(
    listing: list[tuple[str, dict[str, Any]]],
) -> None:
    rt = Runtime("memory://", recover_on_start=False)
    toolset = McpToolset(StdioServer("unused", allowlisted=True))
    try:
        toolset._claim(rt)
        tools = [_tool("anchor")] + [_tool(name, schema) for name, schema in listing if name != "anchor"]
        toolset._sync(tools)
        names = {s.name for s in rt.catalog.offerable()}
        assert "anchor" in names
        assert names == set(toolset.specs())
        assert names | set(toolset.skipped) >= {t.name for t in tools}
        assert rt.call({"name": "anchor", "arguments": {"a": 1}}).error is not None  # still validated
    finally:
        rt.close()
        toolset.close()  # its connection's loop thread (150 examples left 450 descriptors open)


def test_a_name_listed_twice_with_different_definitions_is_not_offered_and_causes_no_new_versions(
    listed: tuple[Runtime, McpToolset],
) -> None:
    rt, toolset = listed
    listing = [_tool("dup"), _tool("dup", {"type": "object"}), _tool("twin"), _tool("twin"), _tool("other")]
    toolset._sync(listing)
    assert sorted(s.key for s in rt.catalog.offerable()) == ["other@1", "twin@1"]
    assert "dup" in toolset.skipped
    again, retired = toolset._sync(listing)  # the same listing, refreshed: nothing changed
    assert (again, retired) == ([], [])
