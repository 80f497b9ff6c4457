"""What a session offers each turn: the provider's tool list, rendered once per tool version, and
handed out as new objects each turn, two levels of dicts down; nothing a caller changes in it,
however deep, reaches the registered tool."""

from __future__ import annotations

import asyncio
import copy
import threading
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.session import PROVIDERS, Provider, Session


def _runtime() -> Runtime:
    return _runtime_tools(Runtime("memory://", recover_on_start=False))


def _runtime_tools(rt: Runtime) -> Runtime:
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


def _saving_threads(rt: Runtime) -> list[int]:
    threads: list[int] = []
    store = rt.engine.runs.run_states
    save = store.save

    def noted(run_id: str, state: Any, texts: Any = ()) -> None:
        threads.append(threading.get_ident())
        save(run_id, state, texts)

    store.save = noted  # type: ignore[method-assign]
    return threads


def _async_turns(rt: Runtime) -> tuple[int, list[int], Any]:
    s = rt.session(provider="openai_chat")  # the run is made (and saved) here

    async def turns() -> tuple[int, Any]:
        await s.auser("show report 1")
        offered = await s.atools()
        await s.auser("and report 2")
        assert s.turn == 2
        return threading.get_ident(), offered

    saving = _saving_threads(rt)
    loop_thread, offered = asyncio.run(turns())
    return loop_thread, saving, offered


def test_auser_and_atools_save_a_file_stores_run_off_the_event_loop(tmp_path: Any) -> None:
    """A sync ``user()`` on a file store waits for the disk on the loop's thread, and holds every
    other session of the loop; ``auser``/``atools`` wait on a worker thread, and save as much."""
    with Runtime(f"sqlite:///{tmp_path / 'run.db'}", recover_on_start=False) as rt:
        _runtime_tools(rt)
        loop_thread, saving, offered = _async_turns(rt)
    assert len(saving) >= 2 and loop_thread not in saving  # each turn saved, never on the loop
    assert [t["function"]["name"] for t in offered] == [f"report_{i}" for i in range(5)]


def test_auser_and_atools_stay_on_the_loop_with_stores_in_memory() -> None:
    with _runtime() as rt:
        loop_thread, saving, _ = _async_turns(rt)
    assert saving and set(saving) == {loop_thread}  # nothing to wait for: no thread hop


def test_atools_waits_on_a_worker_thread_only_for_a_read_or_a_save(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a run this process does not hold reads the store, and an offer of other tools saves
    the run: both off the loop. An agent loop's offer of the same tools again waits for nothing, so a
    thread hop (four to five times the offer itself) buys nothing; it stays on the loop."""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    hops: list[str] = []
    to_thread = asyncio.to_thread

    async def counted(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__name__", repr(fn)))
        return await to_thread(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    with Runtime(url, recover_on_start=False) as rt:
        _runtime_tools(rt)
        s = rt.session(provider="openai_chat")

        async def turns() -> list[list[str]]:
            seen = []
            for turn in range(4):
                await s.auser(f"turn {turn}")
                hops.clear()
                await s.atools()
                seen.append(list(hops))
            rt.add_tool(name="report_new", input_schema={"type": "object"}, fn=lambda: 1, effect="read")
            hops.clear()
            offered = await s.atools()  # other tools: the new pins are saved before they are shown
            seen.append(list(hops))
            assert "report_new" in [t["function"]["name"] for t in offered]
            return seen

        seen = asyncio.run(turns())
        assert seen[0] == ["persist"]  # the first offer pins the tools: saved off the loop
        assert seen[1:4] == [[], [], []]  # the same tools again: on the loop, nothing saved
        assert seen[4] == ["persist"]  # other tools: offered on the loop, saved on a worker thread
    with Runtime(url, recover_on_start=False) as other:  # another process sees the new pins
        _runtime_tools(other)
        other.add_tool(name="report_new", input_schema={"type": "object"}, fn=lambda: 1, effect="read")
        assert "report_new" in other.run_state(s.run_id).pins
        later = Session(other, s.run_id, "openai_chat", None, None)
        other.engine.runs.forget(s.run_id)  # evicted (as past max_live_runs) before the turn
        hops.clear()
        asyncio.run(later.atools())
        assert hops == ["tools"]  # a run this process has not open: read from the store off the loop


def test_asession_makes_a_file_stores_run_off_the_event_loop(tmp_path: Any) -> None:
    """``rt.session()`` saves the new run; from async code ``rt.asession()`` saves it on a worker
    thread, and a run made earlier is read back there too, with the same session as the sync form."""
    with Runtime(f"sqlite:///{tmp_path / 'run.db'}", recover_on_start=False) as rt:
        _runtime_tools(rt)
        saving = _saving_threads(rt)

        async def made() -> tuple[int, Session]:
            s = await rt.asession(provider="anthropic", offer={"names": ["report_1"]})
            await s.auser("show report 1")
            return threading.get_ident(), s

        loop_thread, s = asyncio.run(made())
        assert saving and loop_thread not in saving
        assert s.provider == "anthropic" and s.turn == 1
        assert [t["name"] for t in s.tools()] == ["report_1"]
    with Runtime(f"sqlite:///{tmp_path / 'run.db'}", recover_on_start=False) as other:
        _runtime_tools(other)
        again = asyncio.run(other.asession(s.run_id))
        assert again.run_id == s.run_id and again.turn == 1  # read back from the file


def test_asession_stays_on_the_loop_with_stores_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    hops: list[Any] = []
    monkeypatch.setattr(asyncio, "to_thread", lambda fn, *a, **k: hops.append(fn))
    with _runtime() as rt:
        s = asyncio.run(rt.asession())
        assert s.run_id and hops == []
