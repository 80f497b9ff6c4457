"""A new side-effecting call whose ledger steps run inline goes from its intent to its commit in
the ledger driver's own frame; whatever else happens to it goes on through the commit protocol.

Both ways end alike: the same observations, trace events, ledger entries and flow state, over
generated calls of tools that succeed, fail, lose their answer (``unknown_commit``) or dedupe by
key and answer on their second send, with nodes proposed again (replays, conflicting arguments)
and identical actions still unsettled under another node, on a SQLite file and in memory, sync
and async.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import RetryPolicy
from actionspace.errors import ToolError
from actionspace.pipeline.commit import LedgerDriver
from tests.pipeline.test_fast_effects import _strip

RUN = "run-direct"
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "mode": {"type": "string"}},
    "required": ["a", "mode"],
}
MODES = ("ok", "ok", "ok", "permanent", "transient", "lost", "lost_once")


def _runtime(url: str, *, direct: bool) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    sends: dict[str, int] = {}

    def act(a: int, mode: str, idempotency_key: str = "") -> dict[str, Any]:
        """``lost_once``: the first send of a key loses its answer, the next one answers."""
        sends[idempotency_key] = sends.get(idempotency_key, 0) + 1
        if mode == "permanent":
            raise ToolError("permanent", f"no {a}")
        if mode == "transient":
            raise ToolError("transient", f"busy {a}")
        if mode == "lost" or (mode == "lost_once" and sends[idempotency_key] == 1):
            raise ConnectionError("reset while sending")
        return {"a": a, "sends": sends[idempotency_key]}

    once = RetryPolicy(max_attempts=1)
    rt.add_tool(name="put", input_schema=SCHEMA, fn=act, effect="write", retry=once)
    twice = RetryPolicy(max_attempts=2, deadline_s=30.0, initial_backoff_s=0.0)
    rt.add_tool(name="pay", input_schema=SCHEMA, fn=act, effect="external", idempotency="native", retry=twice)
    rt.engine.driver.direct = direct
    return rt


calls = st.lists(
    st.tuples(
        st.sampled_from(["put", "put", "pay"]),
        st.integers(0, 2),
        st.sampled_from(MODES),
        st.sampled_from([None, "n-a", "n-b", "n-c"]),
        st.booleans(),  # awaited (rt.acall) or not
    ),
    min_size=1,
    max_size=8,
)


def _play(rt: Runtime, proposals: list[tuple[str, int, str, str | None, bool]]) -> dict[str, Any]:
    run_id = rt.new_run(RUN)

    async def play() -> list[Any]:
        out: list[Any] = []
        for name, a, mode, node, awaited in proposals:
            call = ToolCall(name=name, arguments={"a": a, "mode": mode})
            if awaited:
                out.append(await rt.acall(call, run_id=run_id, node_id=node))
            else:
                out.append(rt.call(call, run_id=run_id, node_id=node))
        return out

    observations = asyncio.run(play())
    state = rt.engine.run(run_id)
    entries = sorted(
        (
            e.node_id,
            e.key,
            e.tool,
            e.state,
            e.attempts,
            _strip(dict(e.observation or {})),
            dict(e.error or {}),
        )
        for e in rt.engine.ledger.list(limit=10_000)
        if e.run_id == run_id
    )
    return {
        "observations": [_strip(o.to_dict()) for o in observations],
        "events": [
            (e.seq, e.kind, e.call_id, _strip(json.loads(json.dumps(e.data, default=repr))))
            for e in rt.trace.events(run_id)
        ],
        "ledger": entries,
        "context": state.flow.context,
        "seen": [(k, lab, repr(data)) for k, (lab, data) in state.flow.seen.items()],
    }


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(proposals=calls, store=st.sampled_from(["sqlite", "memory"]))
def test_calls_driven_in_the_direct_frame_end_as_the_protocol_ends_them(
    tmp_path: Path, proposals: list[tuple[str, int, str, str | None, bool]], store: str
) -> None:
    played = []
    for direct in (True, False):
        url = "memory://"
        if store == "sqlite":
            db = tmp_path / f"l{len(list(tmp_path.iterdir()))}.db"
            url = f"sqlite:///{db}"
        with _runtime(url, direct=direct) as rt:
            played.append(_play(rt, proposals))
    assert played[0] == played[1]


@pytest.mark.parametrize("store", ["sqlite", "memory"])
def test_a_new_write_on_the_sync_path_is_not_driven_through_the_protocol(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property above compares outcomes; this shows which calls take the direct frame: a
    new write that commits does, a failed one and a replay go on through the protocol."""
    driven: list[str] = []
    real = LedgerDriver._drive

    def spy(self: LedgerDriver, *args: Any, **kwargs: Any) -> Any:
        driven.append(args[3])
        return real(self, *args, **kwargs)

    monkeypatch.setattr(LedgerDriver, "_drive", spy)
    url = f"sqlite:///{tmp_path / 'l.db'}" if store == "sqlite" else "memory://"
    with _runtime(url, direct=True) as rt:
        run = rt.new_run()
        ok = [rt.call(ToolCall(name="put", arguments={"a": i, "mode": "ok"}), run_id=run) for i in range(3)]
        assert [o.status for o in ok] == ["ok"] * 3
        assert driven == []
        failed = rt.call(ToolCall(name="put", arguments={"a": 9, "mode": "permanent"}), run_id=run)
        assert failed.error is not None and failed.error.category == "permanent"
        assert len(driven) == 1
        again = rt.call(ToolCall(name="put", arguments={"a": 0, "mode": "ok"}), run_id=run, node_id="n")
        replay = rt.call(ToolCall(name="put", arguments={"a": 0, "mode": "ok"}), run_id=run, node_id="n")
        assert again.status == replay.status == "ok" and replay.diagnostics.get("replayed") is True
        assert len(driven) == 2
        states = sorted(e.state for e in rt.engine.ledger.list() if e.run_id == run)
        assert states == ["committed"] * 4 + ["failed"]
