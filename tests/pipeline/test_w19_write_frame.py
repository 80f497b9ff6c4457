"""A plain new write from sync code runs in one frame (pipeline/_write.py) and ends exactly as the
general path ends it.

Over generated write tools (a write or an external call, deduping by key or not, taking the key or
not, blocking or not, labels that make a built-in policy allow, refuse or ask) and generated calls
(node ids given or not, call ids given or not, identical calls again, arguments in and out of the
schema, strings composed and decomposed, integers beyond RFC 8785's domain, tools that commit,
fail, fail retryably or lose their answer), on a SQLite file and in memory: the same observations,
trace events, ledger entries and flow state with the frame as without it. Then which calls take
it (tests/pipeline/test_w19_write_call_budget.py holds how short a chain of Python calls it is).
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog import RetryPolicy
from actionspace.errors import ToolError
from actionspace.ledger.keys import args_digest, idempotency_key
from actionspace.pipeline import _write
from actionspace.policy.labels import Label
from tests.pipeline.test_fast_effects import POLICIES
from tests.pipeline.test_fast_effects import _strip as _no_clock

RUN = "run-w"
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "note": {"type": "string"}, "mode": {"type": "string"}},
    "required": ["a"],
}
NOTES = ["", "x", "café", unicodedata.normalize("NFD", "café"), "a\nb", '"q"', "日本"]


@dataclass(frozen=True)
class Tool:
    name: str
    effect: str
    native: bool
    blocking: bool
    sink: bool
    confidentiality: str
    integrity: str


tools = st.builds(
    Tool,
    name=st.sampled_from(["w0", "w1", "w2"]),
    effect=st.sampled_from(["write", "write", "external"]),
    native=st.booleans(),
    blocking=st.booleans(),
    sink=st.booleans(),
    confidentiality=st.sampled_from(["public", "public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "trusted", "untrusted"]),
)


@st.composite
def proposals(draw: st.DrawFn) -> tuple[ToolCall, str | None, bool]:
    """(the call, its node id, whether it is awaited): mostly valid calls of the tools."""
    args: dict[str, Any] = {"a": draw(st.sampled_from([0, 1, 2, 2**60, 2**60 + 1, -(2**53)]))}
    if draw(st.booleans()):
        args["note"] = draw(st.sampled_from(NOTES))
    args["mode"] = draw(st.sampled_from(["ok", "ok", "int", "int", "permanent", "transient", "lost"]))
    if draw(st.integers(0, 9)) == 0:
        args = {"a": "not a number"}
    call_id = draw(st.sampled_from([None, None, "call_1", "call_2"]))
    name = draw(st.sampled_from(["w0", "w1", "w2", "w0", "nope"]))
    node = draw(st.sampled_from([None, None, "n-a", "n-b"]))
    return ToolCall(name=name, arguments=args, id=call_id), node, draw(st.integers(0, 5)) == 0


def _runtime(url: str, shapes: list[Tool], policy: str, *, frame: bool) -> Runtime:
    rt = Runtime(url, recover_on_start=False, flow_policy=POLICIES[policy])
    sends: dict[str, int] = {}
    for shape in shapes:

        def act(a: int, note: str = "", mode: str = "ok", idempotency_key: str = "") -> dict[str, Any]:
            sends[idempotency_key] = sends.get(idempotency_key, 0) + 1
            if mode == "permanent":
                raise ToolError("permanent", f"no {a}")
            if mode == "transient":
                raise ToolError("transient", f"busy {a}")
            if mode == "lost" and sends[idempotency_key] == 1:
                raise ConnectionError("reset while sending")
            if mode == "int":  # an int result is put in its envelope without the generic shaping
                return a  # type: ignore[return-value]
            return {"a": a, "note": note, "key": idempotency_key, "sends": sends[idempotency_key]}

        def bare(a: int, note: str = "", mode: str = "ok") -> dict[str, Any]:
            return act(a, note, mode)

        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=act if shape.native else bare,
            effect=shape.effect,
            idempotency="native" if shape.native else "none",
            blocking=shape.blocking,
            retry=RetryPolicy(max_attempts=2, deadline_s=30.0, initial_backoff_s=0.0),
            labels={
                "confidentiality": shape.confidentiality,
                "integrity": shape.integrity,
                "sink": shape.sink,
            },
        )
    rt.engine.messages.writes = frame
    return rt


def _strip(value: Any) -> Any:
    value = _no_clock(value)
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in ("created_at", "updated_at")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _play(rt: Runtime, calls: list[tuple[ToolCall, str | None, bool]], user: list[str]) -> dict[str, Any]:
    run_id = rt.new_run(RUN)
    state = rt.engine.run(run_id)
    for conf in user:
        state.flow.add_user_input("hi", Label(confidentiality=conf))  # type: ignore[arg-type]

    async def play() -> list[Any]:
        out: list[Any] = []
        for call, node, awaited in calls:
            if awaited:
                out.append(await rt.acall(call, run_id=run_id, node_id=node))
            else:
                out.append(rt.call(call, run_id=run_id, node_id=node))
        return out

    observations = asyncio.run(play())
    flow = state.flow
    entries = sorted(
        json.dumps(_strip(e.to_dict()), sort_keys=True, default=repr)
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
        "context": flow.context,
        "pending": dict(flow.pending),
        "seen": [(k, lab, repr(data)) for k, (lab, data) in flow.seen.items()],
        "origins": flow.origins(),
        "nodes": next(state.nodes),
    }


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    shapes=st.lists(tools, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(proposals(), min_size=2, max_size=8),
    policy=st.sampled_from(list(POLICIES)),
    user=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
    store=st.sampled_from(["memory", "memory", "sqlite"]),
)
def test_writes_run_in_their_own_frame_end_as_the_general_path_ends_them(
    tmp_path: Path,
    shapes: list[Tool],
    calls: list[tuple[ToolCall, str | None, bool]],
    policy: str,
    user: list[str],
    store: str,
) -> None:
    played = []
    for frame in (True, False):
        url = "memory://"
        if store == "sqlite":
            url = f"sqlite:///{tmp_path / f'l{len(list(tmp_path.iterdir()))}.db'}"
        with _runtime(url, shapes, policy, frame=frame) as rt:
            played.append(_play(rt, calls, user))
    assert played[0] == played[1]


@settings(max_examples=300, deadline=None)
@given(
    args=st.dictionaries(
        st.text(max_size=4),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers(-(2**70), 2**70)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(max_size=6),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=6,
        ),
        max_size=4,
    ),
    node=st.text(max_size=8),
)
def test_the_key_and_digest_made_from_one_text_are_the_ledgers(args: dict[str, Any], node: str) -> None:
    from actionspace.pipeline import _write_parts

    text, digest = _write_parts._digested(args)
    if text is None:
        return  # the frame asks the ledger's own functions
    assert digest == args_digest(args)
    key = _write_parts._key("run-1", node, "put@1", args, text)
    assert key == idempotency_key("run-1", node, "put@1", args)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_new_write_takes_the_frame_and_anything_else_the_general_path(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The property above compares outcomes; this shows which calls the frame answers."""
    answered: list[bool] = []
    real = _write.write_call

    def spy(*args: Any) -> Any:
        obs = real(*args)
        answered.append(obs is not None)
        return obs

    monkeypatch.setattr("actionspace.pipeline.messages.write_call", spy)
    url = f"sqlite:///{tmp_path / 'l.db'}" if store == "sqlite" else "memory://"
    shape = Tool("w0", "write", False, False, False, "public", "trusted")
    with _runtime(url, [shape], "default", frame=True) as rt:
        run = rt.new_run()
        first = rt.call(ToolCall(name="w0", arguments={"a": 0}), run_id=run)  # the name not resolved yet
        out = [rt.call(ToolCall(name="w0", arguments={"a": i}), run_id=run) for i in range(1, 4)]
        assert first.status == "ok" and [o.status for o in out] == ["ok"] * 3
        again = rt.call(ToolCall(name="w0", arguments={"a": 1}), run_id=run)  # its node committed: a replay
        assert again.diagnostics.get("replayed") is True and again.data == out[0].data
        wrong = rt.call(ToolCall(name="w0", arguments={"a": "x"}), run_id=run)  # the schema refuses it
        assert wrong.error is not None and wrong.error.category == "invalid_arguments"
        assert answered == [False, True, True, True, True, False]
        entries = [e for e in rt.engine.ledger.list() if e.run_id == run]
        assert sorted(e.state for e in entries) == ["committed"] * 4
        assert {o.diagnostics["idempotency_key"] for o in out} <= {e.key for e in entries}
