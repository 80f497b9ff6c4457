"""What a session offers each turn: the provider's tool list, rendered once per tool version, and
handed out as new objects each turn, two levels of dicts down; nothing a caller changes in it,
however deep, reaches the registered tool."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    for i in range(5):
        rt.add_tool(
            name=f"report_{i}",
            input_schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            fn=lambda q: q,
            effect="read",
            description=f"Report {i}.",
        )
    return rt


def _scribble(value: Any) -> None:
    """Change every dict a caller can reach in a tool list, however deep."""
    if isinstance(value, dict):
        for inner in list(value.values()):
            _scribble(inner)
        value["scribbled"] = True
    elif isinstance(value, list | tuple):
        for inner in value:
            _scribble(inner)


def _scribble_top(tool: dict[str, Any]) -> None:
    """Change a tool and the dicts in it, two levels down (``function`` and its ``parameters``)."""
    for value in list(tool.values()):
        if isinstance(value, dict):
            for inner in list(value.values()):
                if isinstance(inner, dict):
                    inner["scribbled"] = True
            value["scribbled"] = True
    tool["scribbled"] = True


@pytest.mark.parametrize("provider", PROVIDERS)
def test_changing_the_tools_one_turn_got_leaves_the_next_turns_as_they_were(provider: Provider) -> None:
    with _runtime() as rt:
        s = rt.session(provider=provider)
        s.user("reports")
        first = s.tools()
        want = copy.deepcopy(first)
        _scribble(first[1:])  # a caller changes what it got, at any depth
        second = s.tools()
        assert second[0] == want[0]
        _scribble_top(second[0])  # two levels of dicts down, each turn's are its own
        assert s.tools()[0] == want[0]
        # and nothing reaches the registered tool: the next session renders it as the first did
        assert rt.session(provider=provider).tools() == want
        assert rt.catalog.get("report_1").describe()["input_schema"] == {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        }


@pytest.mark.parametrize("provider", PROVIDERS)
def test_each_tool_is_rendered_once_per_version_not_every_turn(
    provider: Provider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actionspace.discovery.render import render_tools as inner

    rendered: list[int] = []

    def counted(definitions: Any, provider: Provider) -> Any:
        definitions = list(definitions)
        rendered.append(len(definitions))
        return inner(definitions, provider)

    monkeypatch.setattr("actionspace.session.render_tools", counted)
    with _runtime() as rt:
        s = rt.session(provider=provider)
        s.user("reports")
        turns = [s.tools() for _ in range(4)]
        assert sum(rendered) == 5  # once per tool
        assert all(t == turns[0] for t in turns)
        rt.add_tool(name="report_9", input_schema={"type": "object"}, fn=lambda: 1, effect="read")
        assert len(s.tools()) == 6 and sum(rendered) == 6
