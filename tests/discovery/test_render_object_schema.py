"""Every rendered tool's input schema says ``"type": "object"`` at its top, as each provider requires.

A tool known by JSON Schema may leave the top-level ``type`` out (its schema is read as an
object's), but the Anthropic Messages API rejects a tool whose ``input_schema`` has no ``type``
(``tools.0.custom.input_schema.type: Field required``), OpenAI rejects function parameters that are
not of ``type: "object"``, and MCP's ``Tool.inputSchema`` must carry ``"type": "object"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery import PROVIDERS, Provider, render_tools

UNTYPED = {"properties": {"city": {"type": "string"}}, "required": ["city"]}


def _schemas(provider: Provider, rendered: Any) -> list[Mapping[str, Any]]:
    if provider == "openai_chat":
        return [t["function"]["parameters"] for t in rendered]
    if provider == "openai_responses":
        return [t["parameters"] for t in rendered]
    if provider == "anthropic":
        return [t["input_schema"] for t in rendered]
    if provider == "gemini":
        return [t["parametersJsonSchema"] for t in rendered]
    return [t["inputSchema"] for t in rendered["tools"]]


def _runtime() -> Runtime:
    rt = Runtime("memory://")
    rt.add_tool(name="weather", input_schema=UNTYPED, fn=lambda city: city, effect="read")
    return rt


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_schema_without_a_top_level_type_renders_as_an_object_schema(provider: Provider) -> None:
    rt = _runtime()
    offered = rt.offer(run_id=rt.new_run())
    (schema,) = _schemas(provider, render_tools(offered, provider))
    assert schema["type"] == "object"
    assert schema["properties"] == UNTYPED["properties"]
    assert schema["required"] == ["city"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_rendering_a_spec_leaves_its_own_schema_as_registered(provider: Provider) -> None:
    rt = _runtime()
    spec = rt.catalog.get("weather")
    (schema,) = _schemas(provider, render_tools([spec], provider))
    assert schema["type"] == "object"
    assert "type" not in spec.input_schema
    assert rt.call({"name": "weather", "arguments": {"city": "Oslo"}}).data == "Oslo"
