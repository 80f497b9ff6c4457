"""Tool names the providers refuse (OpenAI and Anthropic take ``^[a-zA-Z0-9_-]{1,64}$``): a catalog
may hold them (MCP servers name tools ``files.read``), and one of them in the tool list makes the
provider refuse the whole request. The session offers each under a name the provider takes and
maps the model's calls of that name back to the tool."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider

VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}")
ODD_NAMES = ("files.read", "calendar/create event", "x" * 80, "ünïcode", "files_read")


def _runtime(names: tuple[str, ...]) -> tuple[Runtime, list[str]]:
    rt = Runtime("memory://")
    ran: list[str] = []

    def tool_named(name: str) -> Any:
        def run(q: str) -> dict[str, str]:
            ran.append(name)
            return {"tool": name, "q": q}

        return run

    for name in names:
        rt.add_tool(
            name=name,
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            fn=tool_named(name),
            effect="read",
            description=f"the tool {name}",
        )
    return rt, ran


def _name(provider: Provider, tool: dict[str, Any]) -> str:
    return str(tool["function"]["name"] if provider == "openai_chat" else tool["name"])


def _proposal(provider: Provider, call_id: str, name: str) -> Any:
    if provider == "openai_chat":
        entry = {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"q": "x"}'}}
        return {"role": "assistant", "content": None, "tool_calls": [entry]}
    if provider == "openai_responses":
        return [{"type": "function_call", "call_id": call_id, "name": name, "arguments": '{"q": "x"}'}]
    if provider == "gemini":
        return {
            "role": "model",
            "parts": [{"functionCall": {"id": call_id, "name": name, "args": {"q": "x"}}}],
        }
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": name, "input": {"q": "x"}}],
    }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_offered_tool_name_is_one_the_provider_takes_and_names_one_tool(provider: Provider) -> None:
    rt, _ = _runtime(ODD_NAMES)
    names = [_name(provider, t) for t in rt.session(provider=provider).tools()]
    assert len(names) == len(ODD_NAMES) == len(set(names))
    assert all(VALID.fullmatch(n) for n in names), names
    assert "files_read" in names  # a name the provider takes is kept as it is


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_call_of_an_offered_name_runs_the_tool_it_stands_for(provider: Provider) -> None:
    rt, ran = _runtime(ODD_NAMES)
    s = rt.session(provider=provider)
    s.user("search")
    offered = {_name(provider, t): t for t in s.tools()}
    for i, (name, tool) in enumerate(offered.items()):
        described = tool["function"]["description"] if provider == "openai_chat" else tool["description"]
        turn = s.handle(_proposal(provider, f"call_{i}", name))
        obs = turn.observations[0]
        assert obs.status == "ok", obs.error
        assert obs.call_id == f"call_{i}"
        assert described == f"the tool {ran[-1]}"
    assert sorted(ran) == sorted(ODD_NAMES)


def test_a_continued_run_maps_an_offered_name_without_offering_again() -> None:
    rt, ran = _runtime(ODD_NAMES)
    offered = [_name("anthropic", t) for t in rt.session(run_id="conv-names", provider="anthropic").tools()]
    dotted = next(n for n in offered if n.startswith("files_read_"))
    again = rt.session(run_id="conv-names", provider="anthropic")  # no tools() in this one
    turn = again.handle(_proposal("anthropic", "toolu_1", dotted))
    assert turn.observations[0].status == "ok", turn.observations[0].error
    assert ran == ["files.read"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(min_size=1, max_size=90).filter(lambda n: n.strip() == n and "@" not in n),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_any_catalog_gets_valid_unique_provider_names(names: list[str]) -> None:
    try:
        rt, _ = _runtime(tuple(names))
    except Exception:  # a name the catalog itself refuses
        return
    offered = [_name("openai_responses", t) for t in rt.session(provider="openai_responses").tools()]
    assert len(offered) == len(set(offered)) == len(names)
    assert all(VALID.fullmatch(n) for n in offered), offered
    assert json.dumps(offered)
