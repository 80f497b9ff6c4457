"""The LangGraph adapter hands the model's arguments to the engine untouched, whatever their names,
and answers under the model's own call id."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import ToolMessage

from actionspace import Runtime
from actionspace.adapters.langgraph import governed_tools

LANGCHAIN_NAMES = {"k": "a", "config": "prod", "run_manager": "m", "callbacks": "cb", "self": "me"}


def recorder() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://")
    seen: list[dict[str, Any]] = []
    properties = {name: {"type": "string"} for name in LANGCHAIN_NAMES}

    def put(**arguments: Any) -> dict[str, Any]:
        seen.append(arguments)
        return {"stored": arguments["k"]}

    rt.add_tool(
        name="put",
        input_schema={"type": "object", "properties": properties, "required": sorted(LANGCHAIN_NAMES)},
        fn=put,
        effect="write",
        writes=["kv:{k}"],
    )
    return rt, seen


def tool_call(call_id: str) -> dict[str, Any]:
    return {"name": "put", "args": dict(LANGCHAIN_NAMES), "id": call_id, "type": "tool_call"}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_arguments_named_like_langchain_parameters_reach_the_tool(mode: str) -> None:
    rt, seen = recorder()
    [tool] = governed_tools(rt, run_id="r1")
    message = tool.invoke(tool_call("t1")) if mode == "sync" else asyncio.run(tool.ainvoke(tool_call("t1")))
    assert isinstance(message, ToolMessage) and message.tool_call_id == "t1"
    assert json.loads(str(message.content))["data"] == {"stored": "a"}
    assert seen == [LANGCHAIN_NAMES]


def test_the_observation_answers_the_model_call_id() -> None:
    rt, _ = recorder()
    [tool] = governed_tools(rt, run_id="r1")
    tool.invoke(tool_call("t7"))
    [observed] = [e for e in rt.trace.events("r1") if e.kind == "observation"]
    assert observed.call_id == "t7"
