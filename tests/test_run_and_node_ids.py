"""A run or node id the application passes names ledger rows and trace events: one holding an
unpaired surrogate, which no UTF-8 store can write, is refused as ``ValueError`` on every store and
every entry point, before anything is recorded (as is U+0000: tests/pipeline/test_r2_nul_ids.py); any
whole character is kept."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime


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


@pytest.mark.parametrize("given", [{"run_id": "r\ud800"}, {"node_id": "n\udc80"}])
def test_an_id_holding_a_lone_surrogate_is_refused_and_nothing_is_recorded(
    rt: Runtime, given: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match="unpaired surrogate"):
        rt.call(CALL, **given)
    with pytest.raises(ValueError, match="unpaired surrogate"):
        asyncio.run(rt.acall(CALL, **given))
    if "run_id" in given:  # call_all takes no node id
        with pytest.raises(ValueError, match="unpaired surrogate"):
            rt.call_all(CALL, **given)
    assert rt.sent == []  # type: ignore[attr-defined]
    assert rt.ledger.list() == []


@pytest.mark.parametrize("node_id", ["né", "n😀"])
def test_any_other_node_id_is_kept_as_given(rt: Runtime, node_id: str) -> None:
    obs = rt.call(CALL, node_id=node_id)
    assert obs.status == "ok", obs.error
    (entry,) = rt.ledger.list()
    assert entry.node_id == node_id
