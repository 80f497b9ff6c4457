"""Provider renderings: offered tools and observations in each provider's shape, and back through parse.

Shapes are checked against the official SDK types when ``openai``, ``anthropic`` and ``mcp`` are
installed (their TypedDicts / pydantic models validate the dicts, and no key outside the type is
allowed); without them the documented shapes are checked field by field.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Mapping
from typing import Any

import pytest

from actionspace import Runtime, parse
from actionspace.discovery import (
    DESCRIBE_TOOL,
    PROVIDERS,
    DiscoveryConfig,
    Provider,
    mcp_tools_list,
    openai_chat_tools,
    render_result,
    render_tools,
    result_content,
)
from actionspace.errors import ConfigurationError, ToolError
from actionspace.types import Observation

HAS_SDKS = all(importlib.util.find_spec(m) is not None for m in ("openai", "anthropic", "mcp"))


def _runtime(disclosure: bool = False) -> Runtime:
    rt = Runtime("memory://", discovery=DiscoveryConfig(disclosure=disclosure))

    @rt.tool(effect="write")
    def book_room(room: str, hours: int) -> dict[str, Any]:
        """Book a meeting room.

        Args:
            room: Room name.
            hours: How long, in hours.
        """
        if room == "taken":
            raise ToolError("conflict", "room already booked", alternatives=["blue"])
        return {"room": room, "hours": hours}

    @rt.tool(effect="read")
    def list_rooms() -> list[str]:
        """List the meeting rooms."""
        return ["blue", "taken"]

    return rt


def _typed_dict_check(cls: Any, value: Mapping[str, Any]) -> None:
    """``value`` validates as the SDK TypedDict ``cls`` and has no key the type does not declare."""
    allowed = set(cls.__required_keys__) | set(cls.__optional_keys__)
    assert set(value) <= allowed, f"{sorted(set(value) - allowed)} not in {cls.__name__}"
    _adapter(cls).validate_python(value)


@functools.cache
def _adapter(cls: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(cls)


def _check_tool(provider: Provider, tool: Mapping[str, Any]) -> None:
    if provider == "openai_chat":
        from openai.types.chat import ChatCompletionFunctionToolParam
        from openai.types.shared_params import FunctionDefinition

        _typed_dict_check(ChatCompletionFunctionToolParam, tool)
        _typed_dict_check(FunctionDefinition, tool["function"])
    elif provider == "openai_responses":
        from openai.types.responses import FunctionToolParam

        _typed_dict_check(FunctionToolParam, tool)
    elif provider == "anthropic":
        from anthropic.types import ToolParam

        _typed_dict_check(ToolParam, tool)
    elif provider == "gemini":
        types = pytest.importorskip("google.genai.types")
        declaration = types.FunctionDeclaration.model_validate(tool)
        assert declaration.parameters_json_schema == tool["parametersJsonSchema"]


def _check_sdk_tools(provider: Provider, rendered: Any) -> list[str]:
    """Validate against the SDK; return the tool names as the provider will show them."""
    if provider == "mcp":
        import mcp.types as m

        listed = m.ListToolsResult.model_validate(rendered)
        for tool, raw in zip(listed.tools, rendered["tools"], strict=True):
            assert tool.input_schema == raw["inputSchema"]  # the camelCase key really is the field
        return [t.name for t in listed.tools]
    for tool in rendered:
        _check_tool(provider, tool)
    if provider == "openai_chat":
        return [t["function"]["name"] for t in rendered]
    return [t["name"] for t in rendered]


def _model_call(provider: Provider, name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    """A model's tool call in the provider's own shape."""
    if provider == "openai_chat":
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        }
    if provider == "openai_responses":
        return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}
    if provider == "anthropic":
        return {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
        }
    if provider == "gemini":
        return {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": name, "args": args}}]}
    return {
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": args},
    }


def _check_sdk_call(provider: Provider, raw: dict[str, Any]) -> None:
    if provider == "openai_chat":
        from openai.types.chat import ChatCompletionMessageFunctionToolCallParam

        _typed_dict_check(ChatCompletionMessageFunctionToolCallParam, raw["tool_calls"][0])
    elif provider == "openai_responses":
        from openai.types.responses import ResponseFunctionToolCallParam

        _typed_dict_check(ResponseFunctionToolCallParam, raw)
    elif provider == "anthropic":
        from anthropic.types import ToolUseBlockParam

        _typed_dict_check(ToolUseBlockParam, raw["content"][0])
    elif provider == "gemini":
        pytest.importorskip("google.genai.types").Content.model_validate(raw)
    else:
        import mcp.types as m

        m.CallToolRequest.model_validate({"method": raw["method"], "params": raw["params"]})


def _check_sdk_result(provider: Provider, result: dict[str, Any]) -> None:
    if provider == "openai_chat":
        from openai.types.chat import ChatCompletionToolMessageParam

        _typed_dict_check(ChatCompletionToolMessageParam, result)
    elif provider == "openai_responses":
        from openai.types.responses.response_input_param import FunctionCallOutput

        _typed_dict_check(FunctionCallOutput, result)
    elif provider == "anthropic":
        from anthropic.types import ToolResultBlockParam

        _typed_dict_check(ToolResultBlockParam, result)
    elif provider == "gemini":
        part = pytest.importorskip("google.genai.types").Part.model_validate(result)
        assert part.function_response is not None and part.function_response.response is not None
    else:
        import mcp.types as m

        parsed = m.CallToolResult.model_validate(result)
        assert parsed.is_error == result["isError"]
        assert parsed.structured_content == result["structuredContent"]


def _result_payload(provider: Provider, result: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The JSON the model reads back, after checking the result answers ``call_id``."""
    if provider == "openai_chat":
        assert result["role"] == "tool" and result["tool_call_id"] == call_id
        text = result["content"]
    elif provider == "openai_responses":
        assert result["type"] == "function_call_output" and result["call_id"] == call_id
        text = result["output"]
    elif provider == "anthropic":
        assert result["type"] == "tool_result" and result["tool_use_id"] == call_id
        assert result["is_error"] is (json.loads(result["content"][0]["text"])["status"] == "error")
        text = result["content"][0]["text"]
    elif provider == "gemini":
        answer = result["functionResponse"]
        assert answer["id"] == call_id
        ((key, text),) = answer["response"].items()
        assert key == ("error" if json.loads(text)["status"] == "error" else "output")
    else:
        assert set(result) == {"content", "structuredContent", "isError"}
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        text = result["content"][0]["text"]
    payload: dict[str, Any] = json.loads(text)
    return payload


@pytest.mark.parametrize("provider", PROVIDERS)
def test_offered_tools_render_parse_back_and_results_render_in_the_provider_shape(provider: Provider) -> None:
    rt = _runtime()
    run = rt.new_run()
    rendered = render_tools(rt.offer(run_id=run), provider)
    names = _check_sdk_tools(provider, rendered) if HAS_SDKS else []
    if HAS_SDKS:
        assert names == ["book_room", "list_rooms"]
    raw = _model_call(provider, "book_room", {"room": "blue", "hours": 2}, "call_7")
    if HAS_SDKS:
        _check_sdk_call(provider, raw)
    parsed = parse(raw)
    assert parsed.error is None
    assert [(c.name, dict(c.arguments)) for c in parsed.calls] == [
        ("book_room", {"room": "blue", "hours": 2})
    ]
    obs = rt.call(raw, run_id=run)
    assert obs.status == "ok"
    result = render_result(obs, provider, "call_7")
    if HAS_SDKS:
        _check_sdk_result(provider, result)
    payload = _result_payload(provider, result, "call_7" if provider != "mcp" else "")
    fetched_at = payload.pop("fetched_at")
    assert fetched_at.endswith("Z")
    assert payload == {
        "status": "ok",
        "data": {"room": "blue", "hours": 2},
        "trust": "trusted",
        "source": "book_room",
    }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_error_observation_renders_as_the_provider_error_with_category_and_recovery(
    provider: Provider,
) -> None:
    rt = _runtime()
    run = rt.new_run()
    rt.offer(run_id=run)
    obs = rt.call(_model_call(provider, "book_room", {"room": "taken", "hours": 1}, "c1"), run_id=run)
    assert obs.error is not None and obs.error.category == "conflict"
    result = render_result(obs, provider, "c1")
    if HAS_SDKS:
        _check_sdk_result(provider, result)
    payload = _result_payload(provider, result, "c1" if provider != "mcp" else "")
    assert payload["status"] == "error"
    assert payload["error"]["category"] == "conflict"
    assert payload["error"]["recovery"] == ["reread", "merge", "act_again"]
    assert payload["error"]["alternatives"] == ["blue"]
    if provider == "anthropic":
        assert result["is_error"] is True
    if provider == "mcp":
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["category"] == "conflict"


def test_mcp_annotations_follow_effect_and_reversibility() -> None:
    rt = _runtime()
    listed = mcp_tools_list(rt.offer(run_id=rt.new_run()))
    book, rooms = listed["tools"]
    assert book["annotations"] == {
        "title": "book room",
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": False,
        "openWorldHint": False,
    }
    assert rooms["annotations"]["readOnlyHint"] is True and rooms["annotations"]["idempotentHint"] is True
    assert book["_meta"]["actionspace/risk"] == "medium"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_short_definitions_render_with_an_open_schema_and_name_the_describe_tool(provider: Provider) -> None:
    rt = _runtime(disclosure=True)
    rendered = render_tools(rt.offer(run_id=rt.new_run()), provider)
    if HAS_SDKS:
        assert _check_sdk_tools(provider, rendered) == ["book_room", "list_rooms", DESCRIBE_TOOL]
    tools = rendered["tools"] if provider == "mcp" else rendered
    text = json.dumps(tools[0])
    assert "risk: medium" in text and DESCRIBE_TOOL in text
    describe = json.dumps(tools[-1])
    assert '"tool"' in describe  # the describe tool itself carries its full schema


def test_openai_tools_pass_through_and_specs_render_directly() -> None:
    already = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    assert openai_chat_tools([already]) == (already,)
    rt = _runtime()
    spec = rt.catalog.get("list_rooms")
    assert openai_chat_tools([spec])[0]["function"]["description"] == "List the meeting rooms."
    with pytest.raises(ConfigurationError):
        render_tools([{"description": "no name"}], "anthropic")
    with pytest.raises(ConfigurationError):
        render_tools([], "bedrock")  # type: ignore[arg-type]


def test_an_incomplete_observation_says_so_in_the_result_content() -> None:
    obs = Observation(call_id="c", tool="t", data=[1], complete=False)
    assert result_content(obs) == {
        "status": "ok",
        "data": [1],
        "complete": False,
        "trust": "trusted",
        "source": "t",
    }
    assert result_content(obs, whole=True) == obs.to_dict()
