"""Hostile tool calls through the OpenAI Agents SDK and Pydantic AI adapters: whatever the model
sends as arguments, and whatever the catalog names its tools, the agent run goes on and the model
reads a typed error (category and recovery), never the framework's exception."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")
pytest.importorskip("pydantic_ai")

from agents import Agent as OpenAIAgent
from agents import FunctionTool, Runner
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from actionspace import Runtime
from actionspace.adapters import openai_agents
from actionspace.adapters.pydantic_ai import GovernedToolset
from tests.adapters.framework_tools import shop
from tests.adapters.test_openai_agents import OFFLINE, ScriptedModel, call, say, tool_outputs

PROVIDER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]


def pydantic_ai_answer(rt: Runtime, name: str, raw: Any, **toolset: Any) -> dict[str, Any]:
    """What the model reads after proposing ``name(raw)`` once through a GovernedToolset."""
    governed = GovernedToolset(rt, run_id="r1", **toolset)

    def once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if returns(messages):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart(name, raw, tool_call_id="c1")])

    result = Agent(FunctionModel(once), toolsets=[governed.toolset]).run_sync("go")
    assert result.output == "done"
    [ret] = returns(result.all_messages())
    answer: dict[str, Any] = json.loads(str(ret.content))
    return answer


@pytest.mark.parametrize(
    "raw",
    ["[" * 100_000 + "]" * 100_000, '{"order": ' + "[" * 100_000 + "]" * 100_000 + "}"],
    ids=["deep-list", "deep-in-object"],
)
def test_pydantic_ai_arguments_nested_past_the_decoder_limit_are_a_parse_error(raw: str) -> None:
    answer = pydantic_ai_answer(shop().rt, "lookup", raw)
    assert answer["error"]["category"] == "parse_error"
    assert answer["error"]["recovery"] == ["re_emit_call"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw=st.one_of(
        st.text(max_size=60),
        st.integers(1, 3000).map(lambda n: '{"order": ' + "[" * n + "]" * n + "}"),
        st.integers(1, 3000).map(lambda n: "{" * n),
    )
)
def test_pydantic_ai_any_argument_text_ends_in_an_answer_the_model_reads(raw: str) -> None:
    answer = pydantic_ai_answer(shop().rt, "lookup", raw)
    if answer["status"] == "ok":
        assert answer["data"]["cents"] == 500
    else:
        assert answer["error"]["category"] in {"parse_error", "invalid_arguments"}
        assert answer["error"]["recovery"]


def dotted_runtime(ran: list[str]) -> Runtime:
    """A catalog holding a tool named as MCP servers name theirs, which providers refuse."""
    rt = Runtime("memory://")

    def read(path: str) -> dict[str, str]:
        ran.append(path)
        return {"path": path}

    rt.add_tool(
        name="files.read",
        input_schema={"properties": {"path": {"type": "string"}}, "required": ["path"]},
        fn=read,
        effect="read",
        description="Read a file.",
    )
    return rt


def test_openai_agents_offers_a_dotted_tool_under_a_name_providers_take_and_runs_it() -> None:
    ran: list[str] = []
    rt = dotted_runtime(ran)
    [tool] = openai_agents.governed_tools(rt, run_id="r1")
    assert isinstance(tool, FunctionTool)
    assert PROVIDER_NAME.fullmatch(tool.name), tool.name
    model = ScriptedModel([[call("c1", tool.name, {"path": "a.txt"})], [say("read")]])
    agent = OpenAIAgent(name="reader", model=model, tools=[tool])
    result = asyncio.run(Runner.run(agent, "read a.txt", run_config=OFFLINE))
    [output] = tool_outputs(result)
    assert json.loads(output)["data"] == {"path": "a.txt"} and ran == ["a.txt"]


def test_pydantic_ai_offers_a_dotted_tool_under_a_name_providers_take_and_runs_it() -> None:
    ran: list[str] = []
    rt = dotted_runtime(ran)
    [offered] = GovernedToolset(rt, run_id="r0").toolset.tools
    assert PROVIDER_NAME.fullmatch(offered), offered
    answer = pydantic_ai_answer(rt, offered, {"path": "a.txt"})
    assert answer["data"] == {"path": "a.txt"} and ran == ["a.txt"]
