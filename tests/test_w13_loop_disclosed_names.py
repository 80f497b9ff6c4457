"""A disclosure session offers a tool whose name the providers refuse (``files.read``) under one
they take, and its short definition tells the model to call ``describe_tool`` with that offered
name. Doing exactly that must describe the tool, and the tool must then run: a model that follows
the instructions it was given is never told the tool it was offered does not exist."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery import DiscoveryConfig
from actionspace.session import PROVIDERS, Provider, Session, Turn

ODD_NAMES = ("files.read", "calendar/create event", "x" * 80, "ünïcode")


def _runtime(name: str) -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://", discovery=DiscoveryConfig(disclosure=True))
    ran: list[str] = []

    def run(q: str) -> dict[str, str]:
        ran.append(q)
        return {"q": q}

    rt.add_tool(
        name=name,
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        fn=run,
        effect="read",
        description="looks things up",
    )
    return rt, ran


def _offered(provider: Provider, tools: Any) -> list[tuple[str, str]]:
    """(name, description) of every offered tool, as the model reads them."""
    out = []
    for t in tools:
        body = t["function"] if provider == "openai_chat" else t
        out.append((str(body["name"]), str(body.get("description", ""))))
    return out


def _proposal(provider: Provider, call_id: str, name: str, arguments: dict[str, Any]) -> Any:
    if provider == "openai_chat":
        entry = {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [entry]}
    if provider == "openai_responses":
        return [
            {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}
        ]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": call_id, "name": name, "args": arguments}}],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
    }


def _handle(s: Session, output: Any, use_async: bool) -> Turn:
    return asyncio.run(s.ahandle(output)) if use_async else s.handle(output)


def _follow_the_offer(name: str, provider: Provider, use_async: bool) -> None:
    rt, ran = _runtime(name)
    s = rt.session(run_id="conv", provider=provider)
    s.user("look up x")
    offered = dict(_offered(provider, s.tools()))
    (tool,) = [n for n in offered if n != "describe_tool"]
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool)
    # the definition tells the model how to read the schema; it does just that
    said = re.search(r"describe_tool with tool='([^']+)'", offered[tool])
    assert said is not None and said.group(1) == tool
    described = _handle(s, _proposal(provider, "d1", "describe_tool", {"tool": tool}), use_async)
    (obs,) = described.observations
    assert obs.status == "ok", obs.error
    assert obs.data["input_schema"]["required"] == ["q"]
    called = _handle(s, _proposal(provider, "c1", tool, {"q": "x"}), use_async)
    (obs,) = called.observations
    assert obs.status == "ok", obs.error
    assert ran == ["x"]
    rt.close()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", ODD_NAMES)
def test_describing_a_tool_by_its_offered_name_lets_it_run(
    name: str, provider: Provider, use_async: bool
) -> None:
    _follow_the_offer(name, provider, use_async)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.text(alphabet=st.sampled_from("ab_-.:/ é1"), min_size=1, max_size=90).filter(
        lambda n: n.strip() == n and n.strip() and "@" not in n
    ),
    provider=st.sampled_from(PROVIDERS),
)
def test_any_refused_name_can_be_described_then_called(name: str, provider: Provider) -> None:
    _follow_the_offer(name, provider, False)


def test_the_offered_name_of_another_tool_describes_only_that_tool() -> None:
    """Two tools whose names differ only in refused characters are offered under two names:
    describing one by its offered name describes that one, not the other."""
    rt = Runtime("memory://", discovery=DiscoveryConfig(disclosure=True))
    for name in ("files.read", "files/read"):
        rt.add_tool(
            name=name,
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
            fn=lambda q="", name=name: name,
            effect="read",
        )
    s = rt.session(run_id="two", provider="anthropic")
    s.user("read")
    offered = [n for n, _ in _offered("anthropic", s.tools()) if n != "describe_tool"]
    assert len(set(offered)) == 2
    for tool in offered:
        (obs,) = s.handle(_proposal("anthropic", "d-" + tool, "describe_tool", {"tool": tool})).observations
        assert obs.status == "ok", obs.error
        (ran,) = s.handle(_proposal("anthropic", "c-" + tool, tool, {"q": "x"})).observations
        assert ran.status == "ok", ran.error
        assert obs.data["name"] == ran.data
    rt.close()
