"""A large tool result costs what the model is shown, not what the tool returned: the projection
normalizes only the parts it keeps, and a call shapes its result once, on every path."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actionspace._canonical as canonical
from actionspace import Plan, PlanNode, Runtime, ToolCall
from actionspace._canonical import dumps_plain, normalize
from actionspace.observation import shape
from actionspace.observation.rules.json import project


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 7


class Name(str):
    pass


class Count(int):
    pass


class Ratio(float):
    pass


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=300),
    st.sampled_from([Colour.RED, Colour.BLUE, Level.LOW, Level.HIGH, Name("a name"), Count(12), Ratio(2.5)]),
)
_keys = st.one_of(st.text(max_size=12), st.integers(-50, 50).map(str))


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=40),
        st.lists(children, max_size=40).map(tuple),
        st.dictionaries(_keys, children, max_size=25),
        st.dictionaries(st.integers(-1000, 1000), children, max_size=25),  # keys the encoder writes
    )


_values = st.recursive(_scalars, _containers, max_leaves=400)


@settings(max_examples=300, deadline=None)
@given(value=_values, max_bytes=st.sampled_from((256, 700, 2048, 16_384)))
def test_projecting_as_written_is_projecting_the_normalized_value(value: Any, max_bytes: int) -> None:
    try:
        dumps_plain(value)
    except (TypeError, ValueError, RecursionError):
        return  # the lazy projection is only for values the C encoder wrote
    expected = project(normalize(value), max_bytes)
    got = project(value, max_bytes, normalized=False)
    assert got == expected
    assert dumps_plain(got) == dumps_plain(expected)  # same types too (no enum, tuple or subclass left)


ROWS = [
    {"id": i, "name": f"item {i}", "price": i * 1.5, "tags": ("a", "b"), "level": Level.HIGH}
    for i in range(5000)
]


def test_a_large_result_is_normalized_only_where_it_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    inner = canonical._normalize

    def counted(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return inner(*args)

    monkeypatch.setattr(canonical, "_normalize", counted)
    shaped = shape(ROWS, max_bytes=4096)
    assert calls < 1000  # the 5,000 rows hold 45,000 values; the projection keeps a few dozen
    assert shaped.trimming is not None and shaped.data == project(normalize(ROWS), 4096)


def _counting_shapes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    shapes: list[int] = []
    inner = shape

    def counted(value: Any, **kwargs: Any) -> Any:
        shapes.append(len(value) if isinstance(value, list) else -1)
        return inner(value, **kwargs)

    monkeypatch.setattr("actionspace.pipeline.observe.shape", counted)
    return shapes


def _runtime() -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rows = [{"id": i, "note": "x" * 40} for i in range(3000)]

    @rt.tool(effect="read")
    async def search_items(q: str) -> list[dict[str, Any]]:
        """Search items."""
        return rows

    @rt.tool(effect="read")
    def list_items(q: str) -> list[dict[str, Any]]:
        """List items."""
        return rows

    return rt


CALLS: dict[str, Callable[[Runtime], Any]] = {
    "acall async": lambda rt: _run(rt.acall(ToolCall(name="search_items", arguments={"q": "a"}))),
    "call sync": lambda rt: rt.call(ToolCall(name="list_items", arguments={"q": "a"})),
    "plan node": lambda rt: rt.run_plan(
        Plan(nodes=[PlanNode(id="n", tool="search_items", arguments={"q": "a"})])
    ).nodes["n"],
}


def _run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)


@pytest.mark.parametrize("path", sorted(CALLS))
def test_a_large_result_is_shaped_once_per_call(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = _runtime()
    CALLS[path](rt)  # warm: the run's resolution and the precompiled entry
    shapes = _counting_shapes(monkeypatch)
    obs = CALLS[path](rt)
    assert obs.status == "ok" and obs.trimming is not None and obs.complete is False
    assert len(json.dumps(obs.data)) <= 16_384
    assert shapes == [3000]
    rt.close()
