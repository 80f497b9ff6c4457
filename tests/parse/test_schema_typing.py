"""Text-valued arguments (Qwen3 XML, GLM-4.5) typed by the offered tools' JSON Schemas."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.parse import parse

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "dry_run": {"type": "boolean"},
        "options": {"type": "object"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "code": {"type": "string"},
        "note": {"type": ["string", "null"]},
        "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "mode": {"enum": ["fast", "slow"]},
    },
}


def qwen3(**values: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in values.items())
    return f"<tool_call>\n<function=configure>\n{params}</function>\n</tool_call>"


def glm(**values: str) -> str:
    pairs = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>\n" for k, v in values.items())
    return f"<tool_call>configure\n{pairs}</tool_call>"


def arguments(text: str, tools: Any) -> Any:
    result = parse(text, tools=tools)
    assert result.error is None, result.error
    (call,) = result.calls
    return call.arguments


OPENAI_TOOLS = [{"type": "function", "function": {"name": "configure", "parameters": SCHEMA}}]
EXPECTED = {
    "count": 5,
    "ratio": 2.5,
    "dry_run": True,
    "options": {"depth": 2},
    "tags": ["a", "b"],
    "code": "007",
    "note": None,
    "limit": 10,
    "mode": "fast",
}
RAW = {
    "count": "5",
    "ratio": "2.5",
    "dry_run": "true",
    "options": '{"depth": 2}',
    "tags": '["a", "b"]',
    "code": "007",
    "note": "null",
    "limit": "10",
    "mode": "fast",
}


def test_qwen3_values_are_typed_by_the_property_schema() -> None:
    assert arguments(qwen3(**RAW), OPENAI_TOOLS) == EXPECTED


def test_glm_values_are_typed_by_the_property_schema() -> None:
    assert arguments(glm(**RAW), OPENAI_TOOLS) == EXPECTED


def test_anthropic_and_mcp_tool_definitions_are_accepted_too() -> None:
    assert arguments(qwen3(count="5"), [{"name": "configure", "input_schema": SCHEMA}]) == {"count": 5}
    assert arguments(qwen3(count="5"), [{"name": "configure", "inputSchema": SCHEMA}]) == {"count": 5}
    assert arguments(qwen3(count="5"), [{"name": "configure", "parameters": SCHEMA}]) == {"count": 5}


def test_tool_spec_objects_are_accepted() -> None:
    @dataclass
    class Spec:
        name: str
        input_schema: Mapping[str, Any] = field(default_factory=lambda: SCHEMA)

    assert arguments(qwen3(dry_run="false"), [Spec("configure")]) == {"dry_run": False}


def test_a_versioned_call_name_finds_the_unversioned_schema() -> None:
    text = (
        "<tool_call>\n<function=configure@2>\n<parameter=count>\n7\n</parameter>\n</function>\n</tool_call>"
    )
    assert arguments(text, OPENAI_TOOLS) == {"count": 7}


def test_a_value_that_fits_no_declared_type_stays_a_string_for_validation() -> None:
    assert arguments(qwen3(count="five", dry_run="maybe"), OPENAI_TOOLS) == {
        "count": "five",
        "dry_run": "maybe",
    }


def test_without_a_schema_values_are_json_when_they_are_json_and_text_otherwise() -> None:
    raw = {"n": "42", "flag": "true", "obj": '{"a": [1]}', "city": "Paris", "zip": "02139"}
    expected = {"n": 42, "flag": True, "obj": {"a": [1]}, "city": "Paris", "zip": "02139"}
    assert arguments(qwen3(**raw), None) == expected
    assert arguments(glm(**raw), [{"name": "other_tool", "parameters": SCHEMA}]) == expected


def test_multiline_string_values_keep_their_inner_newlines() -> None:
    code = "def f():\n    return 1\n"
    assert arguments(qwen3(code=code), OPENAI_TOOLS) == {"code": code}


def test_unusable_tool_entries_are_ignored() -> None:
    tools: Any = [{"type": "web_search_preview"}, "not a tool", {"name": "configure"}]
    assert arguments(qwen3(count="5"), tools) == {"count": 5}
