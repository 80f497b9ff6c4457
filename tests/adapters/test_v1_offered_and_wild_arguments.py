"""Every framework adapter offers what the runtime offers and answers unparseable arguments as the
engine does: the schema and description the framework sends equal the runtime's own rendering
(``strict`` off), and arguments that are not JSON come back as ``parse_error``, never as the
framework's own exception or validation text."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")
pytest.importorskip("langgraph")

from agents import Agent as OpenAIAgent
from agents import FunctionTool, Runner
from openai.types.responses import ResponseFunctionToolCall
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import _customize_tool_def  # pyright: ignore[reportPrivateUsage]
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

from actionspace import Runtime
from actionspace.adapters import langgraph, openai_agents
from actionspace.adapters.pydantic_ai import GovernedToolset
from actionspace.discovery.render import openai_responses_tools
from tests.adapters.framework_tools import shop, trace_kinds
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, say, tool_outputs


def kv_runtime() -> Runtime:
    rt = Runtime("memory://")
    rt.add_tool(
        name="put",
        input_schema={"properties": {"k": {"type": "string"}, "v": {"type": "string"}}, "required": ["k"]},
        fn=lambda k, v="": {"k": k, "v": v},
        effect="write",
        writes=["kv:{k}"],
        write_mode="overwrite",
        description="Store a value.",
    )
    return rt


def runtime_offer(rt: Runtime) -> dict[str, Any]:
    [offered] = openai_responses_tools(rt.offer(["put"], disclosure=False))
    return offered


def test_the_openai_agents_tool_is_the_runtime_offer() -> None:
    rt = kv_runtime()
    [tool] = openai_agents.governed_tools(rt)
    assert isinstance(tool, FunctionTool)
    offered = runtime_offer(rt)
    assert tool.params_json_schema == offered["parameters"] and tool.params_json_schema["type"] == "object"
    assert tool.description == offered["description"] and "overwrites" in tool.description
    assert tool.strict_json_schema is offered["strict"] is False


def test_the_langgraph_tool_is_the_runtime_offer() -> None:
    rt = kv_runtime()
    [tool] = langgraph.governed_tools(rt)
    offered = runtime_offer(rt)
    assert tool.args_schema == offered["parameters"]
    assert tool.description == offered["description"]


def test_the_pydantic_ai_tool_is_the_runtime_offer_even_after_the_openai_profile() -> None:
    """Pydantic AI turns on strict mode for a tool whose ``strict`` is unset when its schema allows
    it, so an OpenAI model would be offered another contract than the runtime's ``strict: false``."""
    rt = kv_runtime()
    [tool] = GovernedToolset(rt).toolset.tools.values()
    offered = runtime_offer(rt)
    sent = _customize_tool_def(OpenAIJsonSchemaTransformer, tool.tool_def)
    assert sent.strict is False
    assert sent.parameters_json_schema == offered["parameters"]
    assert sent.description == offered["description"]


NOT_JSON = ['{"order": ', "{order: 7}", "{'order': '7'}", '{"order": "7"} trailing']


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


@pytest.mark.parametrize("raw", NOT_JSON)
def test_pydantic_ai_arguments_that_are_not_json_are_a_parse_error(raw: str) -> None:
    s = shop()
    toolset = GovernedToolset(s.rt, run_id="r1")

    def once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("sorry")])
        return ModelResponse(parts=[ToolCallPart("lookup", raw, tool_call_id="c1")])

    result = Agent(FunctionModel(once), toolsets=[toolset.toolset]).run_sync("what is due?")
    assert result.output == "sorry"
    [ret] = returns(result.all_messages())
    error = json.loads(str(ret.content))["error"]
    assert error["category"] == "parse_error" and error["recovery"] == ["re_emit_call"]
    assert "parsed" in trace_kinds(s, "r1")


@pytest.mark.parametrize("raw", NOT_JSON)
def test_openai_agents_arguments_that_are_not_json_are_a_parse_error(raw: str) -> None:
    s = shop()
    proposal = ResponseFunctionToolCall(
        type="function_call", call_id="c1", name="lookup", arguments=raw, id="fc_c1"
    )
    model = ScriptedModel([[proposal], [say("sorry")]])
    agent = OpenAIAgent(name="till", model=model, tools=openai_agents.governed_tools(s.rt, run_id="r1"))
    result = asyncio.run(Runner.run(agent, "what is due on 7?", run_config=OFFLINE))
    assert result.final_output == "sorry"
    [output] = tool_outputs(result)
    error = json.loads(output)["error"]
    assert error["category"] == "parse_error" and error["recovery"] == ["re_emit_call"]
    assert {"model_output", "parsed", "observation"} <= set(trace_kinds(s, "r1"))
