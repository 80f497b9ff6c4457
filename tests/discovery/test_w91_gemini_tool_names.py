"""Gemini takes a function name only if it starts with a letter or an underscore and holds letters,
digits, ``_ . : -`` up to 64 characters. ``render_tools(..., "gemini")`` refuses any other name,
naming the tool (a developer's error: the request would be refused whole); a session offers every
tool under a name each provider takes and maps the model's call of it back to the tool, and its
``functionResponse`` names the function as the model called it: the name round-trips exactly."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.discovery.names import ProviderNames
from actionspace.discovery.render import PROVIDERS, render_tools
from actionspace.errors import ConfigurationError

GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
EVERY_PROVIDER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
NAMES = st.text(min_size=1, max_size=80) | st.from_regex(r"[A-Za-z0-9_.:\- ]{1,70}", fullmatch=True)


def _definition(name: str) -> dict[str, Any]:
    return {"name": name, "description": "A tool.", "input_schema": {"type": "object"}}


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_render_tools_for_gemini_offers_a_name_unchanged_or_refuses_it_naming_the_tool(name: str) -> None:
    if GEMINI_NAME.fullmatch(name):
        (declaration,) = render_tools([_definition(name)], "gemini")
        assert declaration["name"] == name
        return
    with pytest.raises(ConfigurationError) as refused:
        render_tools([_definition("fine"), _definition(name)], "gemini")
    assert repr(name) in str(refused.value)


@pytest.mark.parametrize("name", ["1st_step", "-x", "a b", "files/read", "x" * 65, "é"])
def test_the_names_gemini_refuses_are_refused_whichever_way_given(name: str) -> None:
    with pytest.raises(ConfigurationError, match="gemini"):
        render_tools([_definition(name)], "gemini")
    for provider in PROVIDERS:
        if provider != "gemini":
            render_tools([_definition(name)], provider)  # the other providers' renderings are unchanged


@settings(max_examples=200, deadline=None)
@given(st.sets(NAMES, min_size=1, max_size=6))
def test_every_tool_is_offered_under_a_name_each_provider_takes_that_maps_back_exactly(
    names: set[str],
) -> None:
    mapping = ProviderNames(1, names)
    offered = {name: mapping.offered(name) for name in names}
    assert len(set(offered.values())) == len(names)  # two tools never share an offered name
    for name, shown in offered.items():
        assert EVERY_PROVIDER.fullmatch(shown) and GEMINI_NAME.fullmatch(shown)
        assert mapping.tool(shown) == name
        assert shown == name or shown not in names
        (declaration,) = render_tools([_definition(shown)], "gemini")
        assert declaration["name"] == shown


@pytest.mark.parametrize("names", [("1st_step", "files.read"), ("-x", "a b:c"), ("ok_name", "é")])
def test_a_gemini_session_runs_each_tool_by_its_offered_name_and_answers_under_that_name(
    names: tuple[str, ...],
) -> None:
    rt = Runtime("memory://")
    ran: list[str] = []

    def tool_of(name: str) -> Any:
        def run() -> str:
            ran.append(name)
            return name

        return run

    for name in names:
        rt.add_tool(
            name=name,
            input_schema={"type": "object", "properties": {}},
            fn=tool_of(name),
            effect="read",
            description="A tool.",
        )
    s = rt.session(run_id="names", provider="gemini")
    s.user("run them")
    offered = [d["name"] for d in s.tools()]
    assert all(GEMINI_NAME.fullmatch(n) for n in offered)
    parts = [{"functionCall": {"id": f"c{i}", "name": n, "args": {}}} for i, n in enumerate(offered)]
    turn = s.handle({"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}]})
    assert sorted(ran) == sorted(names)
    (content,) = turn.messages
    answers = [p["functionResponse"] for p in content["parts"]]
    assert [(a["id"], a["name"]) for a in answers] == [(f"c{i}", n) for i, n in enumerate(offered)]
    assert all("output" in a["response"] for a in answers)
    assert sorted(o.tool for o in turn.observations) == sorted(names)  # the host's observations: the tools
    rt.close()
