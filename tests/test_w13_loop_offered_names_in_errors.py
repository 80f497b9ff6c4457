"""A tool whose name the providers refuse (``files.read``) is offered under one they take. When the
model misnames it, the answer it reads points it at tools by the names it was offered: a
suggestion it follows must be a name the provider takes in the conversation, and must run the
tool it stands for. The same holds for the "describe it first" answer of a disclosure run."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery import DiscoveryConfig
from actionspace.session import PROVIDERS, Provider, Session

TAKEN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
TOOLS = ("files.read", "files.write", "calendar/create event")


def _runtime(disclosure: bool = False) -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://", discovery=DiscoveryConfig(disclosure=disclosure))
    ran: list[str] = []
    for name in TOOLS:

        def run(path: str = "", name: str = name) -> str:
            ran.append(name)
            return name

        rt.add_tool(
            name=name,
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
            fn=run,
            effect="read",
        )
    return rt, ran


def _offered(provider: Provider, tools: Any) -> set[str]:
    return {str(t["function"]["name"] if provider == "openai_chat" else t["name"]) for t in tools}


def _call(provider: Provider, call_id: str, name: str, args: dict[str, Any]) -> Any:
    if provider == "openai_chat":
        entry = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return {"role": "assistant", "content": None, "tool_calls": [entry]}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(args)}]
    if provider == "gemini":
        return {"role": "model", "parts": [{"functionCall": {"id": call_id, "name": name, "args": args}}]}
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
    }


def _read(s: Session, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The result the model reads of its call."""
    (message,) = s.handle(_call(s.provider, call_id, name, args)).messages
    if s.provider == "openai_chat":
        text = message["content"]
    elif s.provider == "openai_responses":
        text = message["output"]
    elif s.provider == "gemini":
        ((key, text),) = message["parts"][0]["functionResponse"]["response"].items()
        assert key == ("error" if json.loads(text)["status"] == "error" else "output")
    else:
        text = message["content"][0]["content"][0]["text"]
    return dict(json.loads(text))


def _quoted(message: str) -> list[str]:
    return re.findall(r"'([^']*)'", message)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("typo", ["files_reed", "files.reed", "files-read"])
def test_a_misnamed_call_is_pointed_at_offered_names_that_run_the_tool(provider: Provider, typo: str) -> None:
    rt, ran = _runtime()
    s = rt.session(run_id="conv", provider=provider)
    s.user("read the file")
    offered = _offered(provider, s.tools())
    error = _read(s, "c1", typo, {"path": "a"})["error"]
    assert error["category"] == "unknown_tool"
    assert error["alternatives"] and set(error["alternatives"]) <= offered
    assert all(TAKEN.fullmatch(a) for a in error["alternatives"])
    # every name it quotes is the model's own or one it was offered
    assert set(_quoted(error["message"])) <= offered | {typo}
    suggested = error["alternatives"][0]
    result = _read(s, "c2", suggested, {"path": "a"})
    assert result["status"] == "ok"
    assert ran == [result["data"]]
    rt.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_describe_it_first_names_the_tool_as_offered(provider: Provider) -> None:
    rt, ran = _runtime(disclosure=True)
    s = rt.session(run_id="conv", provider=provider)
    s.user("read the file")
    offered = _offered(provider, s.tools())
    tool = next(n for n in offered if n.startswith("files_read"))
    error = _read(s, "c1", tool, {"path": "a"})["error"]
    assert error["category"] == "unknown_tool"
    assert set(_quoted(error["message"])) <= offered
    said = re.search(r"describe_tool with tool='([^']+)'", error["message"])
    assert said is not None and said.group(1) == tool
    assert _read(s, "c2", "describe_tool", {"tool": said.group(1)})["status"] == "ok"
    assert _read(s, "c3", tool, {"path": "a"})["status"] == "ok"
    assert ran == ["files.read"]
    rt.close()


def test_the_observations_keep_the_tools_own_names() -> None:
    """The host's record names the catalog's tools; only what the model reads is renamed."""
    rt, _ = _runtime()
    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("read the file")
    s.tools()
    (obs,) = s.handle(_call("openai_chat", "c1", "files.reed", {})).observations
    assert obs.error is not None and obs.error.alternatives[0] == "files.read"
    rt.close()
