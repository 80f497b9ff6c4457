"""A run or node id holding U+0000 is refused as ``ValueError`` at every entry point, on every store,
before anything is recorded: PostgreSQL's text cannot hold it, and a run named so would lose its trace."""

from __future__ import annotations

import asyncio
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.pipeline.runs import check_id


@pytest.fixture(params=["memory", "sqlite"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Runtime:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/as.db"
    runtime = Runtime(store, recover_on_start=False)
    sent: list[int] = []

    @runtime.tool(effect="write", writes=["box:{x}"])
    def put(x: int) -> int:
        """Put x in its box."""
        sent.append(x)
        return x

    runtime.sent = sent  # type: ignore[attr-defined]
    return runtime


CALL = {"name": "put", "arguments": {"x": 1}}


async def _streamed(rt: Runtime, **ids: Any) -> list[Any]:
    return [obs async for obs in rt.astream(CALL, **ids)]


def test_a_run_id_holding_nul_is_refused_everywhere_and_nothing_is_recorded(rt: Runtime) -> None:
    run_id = "conv\x0042"
    with pytest.raises(ValueError, match="U\\+0000"):
        rt.call(CALL, run_id=run_id)
    with pytest.raises(ValueError, match="U\\+0000"):
        asyncio.run(rt.acall(CALL, run_id=run_id))
    with pytest.raises(ValueError, match="U\\+0000"):
        rt.call_all(CALL, run_id=run_id)
    with pytest.raises(ValueError, match="U\\+0000"):
        rt.session(run_id, provider="openai_chat")
    with pytest.raises(ValueError, match="U\\+0000"):
        rt.new_run(run_id)
    assert rt.sent == []  # type: ignore[attr-defined]
    assert rt.ledger.list() == []
    assert list(rt.trace.events(run_id)) == []


def test_a_node_id_holding_nul_is_refused_on_an_open_run_too_and_nothing_is_sent(rt: Runtime) -> None:
    run_id = rt.new_run("conv-open")
    assert rt.call({"name": "put", "arguments": {"x": 2}}, run_id=run_id).ok  # the run is open
    before = len(list(rt.trace.events(run_id)))
    for node_id in ("n\x00", "\x00", "node\x00😀"):
        with pytest.raises(ValueError, match="U\\+0000"):
            rt.call(CALL, run_id=run_id, node_id=node_id)
        with pytest.raises(ValueError, match="U\\+0000"):
            asyncio.run(rt.acall(CALL, run_id=run_id, node_id=node_id))
        with pytest.raises(ValueError, match="U\\+0000"):
            asyncio.run(_streamed(rt, run_id=run_id, node_id=node_id))
    assert rt.sent == [2]  # type: ignore[attr-defined]
    assert [e.node_id for e in rt.ledger.list()] != [] and all(
        "\x00" not in e.node_id for e in rt.ledger.list()
    )
    assert len(list(rt.trace.events(run_id))) == before


def test_a_plain_node_id_still_streams_and_is_kept(rt: Runtime) -> None:
    run_id = rt.new_run("conv-stream")
    (obs,) = asyncio.run(_streamed(rt, run_id=run_id, node_id="n-1"))
    assert obs.ok, obs.error
    assert [e.node_id for e in rt.ledger.list()] == ["n-1"]


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_check_id_refuses_exactly_the_ids_holding_nul_or_a_lone_surrogate(head: str, tail: str) -> None:
    value = head + "\x00" + tail
    with pytest.raises(ValueError):
        check_id("run id", value)
    clean = "".join(c for c in head if c != "\x00" and not "\ud800" <= c <= "\udfff")
    check_id("node id", clean)  # anything else is kept


@given(st.text(alphabet=string.printable, min_size=1))
def test_printable_ids_without_nul_pass(value: str) -> None:
    check_id("run id", value)
    check_id("node id", value)


def test_an_empty_run_id_is_refused_an_empty_node_id_is_not_judged_here() -> None:
    with pytest.raises(ValueError, match="the run id is empty"):
        check_id("run id", "")
    check_id("node id", "")
