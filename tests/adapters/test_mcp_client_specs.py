"""MCP annotations become effect, risk and labels only for allowlisted servers."""

from __future__ import annotations

import mcp_types as types

from actionspace import Runtime
from actionspace.adapters._mcp_specs import content_value, fingerprint, map_annotations
from actionspace.adapters.mcp_client import McpToolset, StdioServer

READ = types.ToolAnnotations(read_only_hint=True, open_world_hint=False)


def test_a_read_only_tool_of_an_allowlisted_server_is_a_read_without_approval() -> None:
    mapped = map_annotations(READ, trusted=True)
    assert (mapped.effect, mapped.risk, mapped.requires_approval) == ("read", "low", False)
    assert mapped.labels.integrity == "trusted"


def test_a_read_only_claim_of_an_untrusted_server_is_ignored_and_needs_approval() -> None:
    mapped = map_annotations(READ, trusted=False)
    assert (mapped.effect, mapped.risk, mapped.requires_approval) == ("external", "high", True)
    assert mapped.labels.integrity == "untrusted"


def test_missing_hints_take_the_specs_cautious_defaults() -> None:
    mapped = map_annotations(None, trusted=True)
    assert (mapped.effect, mapped.risk, mapped.reversible) == ("external", "high", False)


def test_a_closed_world_destructive_tool_is_a_high_risk_write() -> None:
    hints = types.ToolAnnotations(read_only_hint=False, open_world_hint=False)
    assert (map_annotations(hints, trusted=True).effect, map_annotations(hints, trusted=True).risk) == (
        "write",
        "high",
    )
    gentle = types.ToolAnnotations(destructive_hint=False, open_world_hint=False)
    assert map_annotations(gentle, trusted=True).risk == "medium"


def test_open_world_reads_carry_untrusted_output() -> None:
    hints = types.ToolAnnotations(read_only_hint=True, open_world_hint=True)
    mapped = map_annotations(hints, trusted=True)
    assert mapped.effect == "read"
    assert mapped.labels.integrity == "untrusted"


def _tool(**changes: object) -> types.Tool:
    base: dict[str, object] = {
        "name": "t",
        "description": "d",
        "input_schema": {"type": "object", "properties": {"a": {"type": "string"}}},
    }
    return types.Tool.model_validate({**base, **changes})


def test_the_fingerprint_changes_with_the_schema_and_the_annotations_only() -> None:
    assert fingerprint(_tool()) == fingerprint(_tool())
    assert fingerprint(_tool()) != fingerprint(_tool(input_schema={"type": "object"}))
    assert fingerprint(_tool()) != fingerprint(_tool(annotations={"readOnlyHint": True}))


def test_structured_content_wins_and_binary_blocks_are_summarised() -> None:
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert content_value(structured) == {"n": 1}
    text = types.CallToolResult(content=[types.TextContent(type="text", text="hi")])
    assert content_value(text) == "hi"
    mixed = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="see"),
            types.ImageContent(type="image", data="AAAA", mime_type="image/png"),
        ]
    )
    value = content_value(mixed)
    assert value[0] == {"type": "text", "text": "see"}
    assert value[1]["bytes"] == 3
    assert "data" not in value[1]


def test_a_listing_registers_new_tools_versions_changed_ones_and_retires_removed_ones() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    toolset = McpToolset(StdioServer("unused", allowlisted=True, prefix="s."))
    toolset._claim(rt)
    first, _ = toolset._sync([_tool(name="a"), _tool(name="b"), _tool(name="c")])
    assert sorted(s.key for s in first) == ["s.a@1", "s.b@1", "s.c@1"]
    added, retired = toolset._sync(
        [_tool(name="a"), _tool(name="b", input_schema={"type": "object"}), _tool(name="d")]
    )
    assert sorted(s.key for s in added) == ["s.b@2", "s.d@1"]
    assert sorted(s.key for s in retired) == ["s.b@1", "s.c@1"]
    assert sorted(s.key for s in rt.catalog.offerable()) == ["s.a@1", "s.b@2", "s.d@1"]
    assert sorted(toolset.specs()) == ["s.a", "s.b", "s.d"]
    again, _ = toolset._sync([_tool(name="a"), _tool(name="b"), _tool(name="c"), _tool(name="d")])
    # a definition listed again is its earlier version, active again (never a new number for it)
    assert sorted(s.key for s in again) == ["s.b@1", "s.c@1"]
    assert all(s.lifecycle == "active" for s in again)
    changed, _ = toolset._sync([_tool(name="b", input_schema={"type": "object", "properties": {}})])
    assert [s.key for s in changed] == ["s.b@3"]  # a new definition: a number never given before
    rt.close()


def test_a_tool_whose_schema_cannot_be_used_is_skipped_not_fatal() -> None:
    rt = Runtime("memory://", recover_on_start=False)
    toolset = McpToolset(StdioServer("unused"))
    toolset._claim(rt)
    added, _ = toolset._sync([_tool(name="ok"), _tool(name="bad", input_schema={"type": "array"})])
    assert [s.name for s in added] == ["ok"]
    assert "bad" in toolset.skipped
    rt.close()


def test_binary_of_an_embedded_resource_is_summarised_like_a_picture() -> None:
    blob = types.BlobResourceContents(uri="file:///scan.png", blob="QUJD" * 1000, mime_type="image/png")
    text = types.TextResourceContents(uri="file:///a.txt", text="hello", mime_type="text/plain")
    result = types.CallToolResult(
        content=[
            types.EmbeddedResource(type="resource", resource=blob),
            types.EmbeddedResource(type="resource", resource=text),
        ]
    )
    scan, note = content_value(result)
    assert "blob" not in scan["resource"]
    assert scan["resource"]["bytes"] == 3000
    assert scan["resource"]["uri"] == "file:///scan.png" and scan["resource"]["mimeType"] == "image/png"
    assert note["resource"]["text"] == "hello"
