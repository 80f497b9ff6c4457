"""The commonest simple call written out in one frame (pipeline/_direct.py) ends every call as the
path it stands in for (``Messages.quick``: ``FastPath.take``, ``begin``, ``tail``) and as the
stages do: same events, observations and flow state, including where it hands a call over once
its events are numbered (a tool that waits or fails, a result not shaped inline, another thread's
events in between, a bug of ours, a cancellation, a store that refuses the record)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy.flow import MAX_REMEMBERED
from actionspace.policy.labels import Label
from actionspace.trace._memory_records import CallLog
from actionspace.trace.memory import MemoryTraceStore
from actionspace.types import SHOWN_UNDER
from tests.pipeline.test_fast import POLICIES, PRINCIPALS, ToolShape, _runtime, _view, tool_shapes

RUN = "run-direct"


def _general(rt: Runtime) -> Runtime:
    """``rt`` with ``Engine.quick`` as it was before the one-frame path: ``Messages.quick``."""
    rt.engine.quick = rt.engine.messages.quick
    return rt


def _entry(name: str, args: dict[str, Any], call_id: str | None) -> str:
    entry: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    if call_id is not None:
        entry["id"] = call_id
    return json.dumps(entry)


@st.composite
def entries(draw: st.DrawFn) -> tuple[str, str]:
    """(raw OpenAI entry text, principal) of one call; mostly valid calls of known tools."""
    # Names with space around them miss the run's resolutions (not stripped here): Messages.quick
    # strips and reads them.
    name = draw(st.sampled_from(["t0", "t0", "t1", "t2", " t1 ", "t0 ", "\tt2", "t1\n", "nope"]))
    args = draw(
        st.one_of(
            st.fixed_dictionaries({"a": st.integers(-(2**70), 2**70)}, optional={"b": st.integers(-5, 5)}),
            st.fixed_dictionaries({"a": st.integers(0, 9), "s": st.text(max_size=6)}),
            st.fixed_dictionaries({"a": st.sampled_from(["x", 1.5, 2.0])}),
        )
    )
    call_id = draw(st.one_of(st.none(), st.just(""), st.from_regex(r"call_[a-z0-9]{1,4}", fullmatch=True)))
    return _entry(name, args, call_id), draw(st.sampled_from(list(PRINCIPALS)))


def _play(rt: Runtime, calls: list[tuple[str, str]], user_labels: list[str]) -> dict[str, Any]:
    run_id = rt.new_run(RUN)
    state = rt.engine.run(run_id)
    for conf in user_labels:
        state.flow.add_user_input("hello", Label(confidentiality=conf))  # type: ignore[arg-type]

    async def play() -> list[Any]:
        return [await rt.acall(raw, run_id=run_id, principal=PRINCIPALS[who]) for raw, who in calls]

    observations = asyncio.run(play())
    return {**_view(rt, run_id, observations), "nodes": next(state.nodes)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(tool_shapes, min_size=1, max_size=3, unique_by=lambda t: t.name),
    calls=st.lists(entries(), min_size=3, max_size=12),
    policy=st.sampled_from(list(POLICIES)),
    user_labels=st.lists(st.sampled_from(["public", "internal", "secret"]), max_size=1),
)
def test_the_one_frame_path_the_path_it_replaces_and_the_stages_end_calls_alike(
    tools: list[ToolShape], calls: list[tuple[str, str]], policy: str, user_labels: list[str]
) -> None:
    with (
        _runtime(tools, policy, fast=True) as direct,
        _general(_runtime(tools, policy, fast=True)) as general,
        _runtime(tools, policy, fast=False) as staged,
    ):
        want = _play(staged, calls, user_labels)
        assert _play(general, calls, user_labels) == want
        assert _play(direct, calls, user_labels) == want


class _Kept(CallLog):
    """A run's log of kept calls in the memory store that notes what the one-frame path appends
    to it: through ``append_kept`` or, once it holds the log, by itself (``call_log``)."""

    taken: list[tuple[Any, ...]]
    quiet = False

    def append(self, record: Any) -> None:  # a record: CallLog lays its fields flat
        if not self.quiet:
            self.taken.append(record)
        super().append(record)


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every record the memory store took from the one-frame path, in order (not those
    ``append_call`` took from the other paths)."""
    taken: list[tuple[Any, ...]] = []
    append_kept, append_call = MemoryTraceStore.append_kept, MemoryTraceStore.append_call

    def noted(store: MemoryTraceStore, run_id: str) -> _Kept:
        calls = store._calls.get(run_id)
        if type(calls) is not _Kept:
            calls = store._calls[run_id] = _Kept(calls or ())
            calls.taken = taken
            store._runs.setdefault(run_id, [])
        return calls

    def spy(self: MemoryTraceStore, run_id: str, record: tuple[Any, ...]) -> None:
        noted(self, run_id)
        append_kept(self, run_id, record)

    def other(self: MemoryTraceStore, run_id: str, call: Any, records: Any) -> None:
        calls = noted(self, run_id)
        calls.quiet = True
        try:
            append_call(self, run_id, call, records)
        finally:
            calls.quiet = False

    monkeypatch.setattr(MemoryTraceStore, "append_kept", spy)
    monkeypatch.setattr(MemoryTraceStore, "append_call", other)
    return taken


def _pair(fn: Callable[..., Any], schema: dict[str, Any] | None = None) -> tuple[Runtime, Runtime]:
    """Two runtimes with the async tool ``t0`` running ``fn``: the one-frame path, and the path
    it replaces."""
    made = []
    for _ in range(2):
        rt = Runtime("memory://")
        rt.add_tool(
            name="t0",
            input_schema=schema
            or {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            fn=fn,
            effect="none",
            labels={"confidentiality": "public", "integrity": "trusted"},  # no call id kept per label
        )
        made.append(rt)
    return made[0], _general(made[1])


def _calls(n: int) -> list[str]:
    return [_entry("t0", {"a": i}, f"call_{i}") for i in range(n)]


def _same(direct: Runtime, general: Runtime, calls: list[str], prepare: Callable[[Runtime], None]) -> Any:
    """The views of both runtimes after ``calls`` (``prepare`` applied to each run after the
    first two calls, which resolve the name and build the entry); asserts they are equal."""
    views = []
    for rt in (direct, general):
        with rt:
            run_id = rt.new_run(RUN)

            async def play(rt: Runtime = rt, run_id: str = run_id) -> list[Any]:
                out: list[Any] = [await rt.acall(raw, run_id=run_id) for raw in calls[:2]]
                prepare(rt)
                for raw in calls[2:]:
                    try:
                        out.append(await rt.acall(raw, run_id=run_id))
                    except asyncio.CancelledError:
                        out.append("cancelled")
                return out

            views.append(_view_or_cancelled(rt, run_id, asyncio.run(play())))
    assert views[0] == views[1]
    return views[0]


def _view_or_cancelled(rt: Runtime, run_id: str, out: list[Any]) -> dict[str, Any]:
    observations = [o for o in out if o != "cancelled"]
    return {**_view(rt, run_id, observations), "cancelled": [o == "cancelled" for o in out]}


def test_a_repeated_simple_call_is_stored_from_the_one_frame_path(kept: list[tuple[Any, ...]]) -> None:
    async def t0(a: int) -> int:
        return a * 2

    direct, general = _pair(t0)
    view = _same(direct, general, _calls(6), lambda rt: None)
    assert [o["data"] for o in view["observations"]] == [0, 2, 4, 6, 8, 10]
    assert len(kept) == 4  # the first call resolves the name, the second builds the entry
    assert [record[2] for record in kept] == ["call_2", "call_3", "call_4", "call_5"]


@pytest.mark.parametrize("returns", ["waits", "fails", "waits_then_fails", "text", "none", "big"])
def test_each_hand_over_ends_the_call_as_the_path_it_replaces(returns: str, kept: list[Any]) -> None:
    async def t0(a: int) -> Any:
        if returns.startswith("waits"):
            await asyncio.sleep(0)
        if returns.endswith("fails"):
            raise ValueError(f"bad a={a}")
        return {"text": f"a={a}", "none": None, "big": "line of output\n" * 4000}.get(returns, a)

    direct, general = _pair(t0)
    view = _same(direct, general, _calls(5), lambda rt: None)
    assert len(view["observations"]) == 5
    assert kept == []  # none of them is the common case


def test_another_threads_events_between_the_numbers_keep_their_numbers(kept: list[Any]) -> None:
    async def t0(a: int) -> int:
        return a

    def gap(rt: Runtime) -> None:
        run = rt.engine.run(RUN)
        start = next(run.seq)

        def numbers() -> Iterator[int]:  # the third number of the next call is taken by another thread
            yield from (start, start + 1)
            yield from itertools.count(start + 3)

        run.seq = numbers()  # type: ignore[assignment]

    direct, general = _pair(t0)
    view = _same(direct, general, _calls(4), gap)
    seqs = [event[0] for event in view["events"]]
    assert len(seqs) == len(set(seqs)) and sorted(seqs) == seqs
    assert len(kept) == 1  # the call after the gap is compact again


def test_a_bug_of_ours_after_the_numbers_is_an_internal_observation(monkeypatch: pytest.MonkeyPatch) -> None:
    async def t0(a: int) -> int:
        return a

    class Breaking(OrderedDict[str, Any]):
        """The calls the model was shown, failing once to take one more (the flow state's record,
        after the call's events were numbered, on either path)."""

        armed = False

        def __setitem__(self, key: str, value: Any) -> None:
            if self.armed:
                self.armed = False
                raise RuntimeError("flow state broke")
            super().__setitem__(key, value)

    def breaks(rt: Runtime) -> None:  # from the third call on
        flow = rt.engine.run(RUN).flow
        seen = Breaking(flow.seen)
        seen.armed = True
        flow.seen = seen

    direct, general = _pair(t0)
    view = _same(direct, general, _calls(3), breaks)
    last = view["observations"][-1]
    assert last["status"] == "error" and last["error"]["category"] == "internal"


def test_a_cancellation_at_the_first_step_stores_the_events_and_propagates() -> None:
    async def t0(a: int) -> int:
        if a == 2:
            raise asyncio.CancelledError
        return a

    direct, general = _pair(t0)
    view = _same(direct, general, _calls(3), lambda rt: None)
    assert view["cancelled"] == [False, False, True]
    assert [event[1] for event in view["events"][-4:]] == ["parsed", "authorized", "validated", "dispatched"]


def test_a_store_that_refuses_the_record_is_logged_and_the_call_still_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def t0(a: int) -> int:
        return a + 1

    def refuse(self: MemoryTraceStore, run_id: str, record: tuple[Any, ...]) -> None:
        raise OSError("store full")

    monkeypatch.setattr(MemoryTraceStore, "append_kept", refuse)
    direct, _ = _pair(t0)
    with direct, caplog.at_level(logging.ERROR, logger="actionspace"):
        run_id = direct.new_run(RUN)

        async def play() -> list[Any]:
            return [await direct.acall(raw, run_id=run_id) for raw in _calls(3)]

        out = asyncio.run(play())
        assert [o.data for o in out] == [1, 2, 3]
        assert [e.call_id for e in direct.trace.events(run_id) if e.kind == "observation"] == [
            "call_0",
            "call_1",
        ]
    assert "rejected" in caplog.text


def test_nested_arguments_are_read_once_and_a_key_given_twice_is_refused(kept: list[Any]) -> None:
    async def t0(a: Any) -> int:
        return len(a)

    direct, general = _pair(t0, {"type": "object", "properties": {"a": {"type": "object"}}})
    nested = [_entry("t0", {"a": {"x": 1, "y": {"z": 2}}}, f"call_{i}") for i in range(4)]
    twice = _entry("t0", {"a": {}}, "call_9").replace('{\\"a\\": {}}', '{\\"a\\": {}, \\"a\\": {}}')
    view = _same(direct, general, [*nested, twice], lambda rt: None)
    assert [o["data"] for o in view["observations"][:4]] == [2, 2, 2, 2]
    assert len(kept) == 2  # the first two calls resolve the name and build the entry
    last = view["observations"][-1]
    assert last["status"] == "error" and last["error"]["category"] == "parse_error"


def _flow_and_numbers(rt: Runtime, run_id: str) -> dict[str, Any]:
    """What the flow state's record and the store's append leave besides the events (_view
    compares those): the tools of the calls shown, the versions, the next event number, the mark
    and the snapshot of the run."""
    run = rt.engine.run(run_id)
    flow = run.flow
    return {
        "seen": [(k, lab, data) for k, (lab, data) in flow.seen.items()],
        "tools": sorted(flow.tools.items()),
        "versions": (flow.version, flow.label_version),
        "context": flow.context,
        "next": rt.trace.next_seq(run_id),
        "events": len(rt.trace.events(run_id)),
        "mark": (run.mark() == run.saved, run.mark()),
        "snapshot": {k: v for k, v in run.snapshot().items() if k != "principal"},
    }


@pytest.mark.parametrize("tool_label", ["public", "internal"])
@pytest.mark.parametrize("run_label", [None, "internal", "secret"])
def test_a_long_run_leaves_the_flow_state_numbers_and_snapshot_of_the_path_it_replaces(
    tool_label: str, run_label: str | None, kept: list[Any]
) -> None:
    """More calls than the flow state remembers, call ids given again (recent and forgotten ones),
    a tool whose label keeps call ids up to their cap, run labels that do and do not restrict."""

    async def t0(a: int) -> int:
        return a

    ids = [f"call_{i}" for i in range(1030)] + ["call_1029", "call_3", "call_1020", "call_1029"]
    calls = [_entry("t0", {"a": i}, cid) for i, cid in enumerate(ids)]
    views, shown = [], []
    for general in (False, True):
        rt = Runtime("memory://")
        rt.add_tool(
            name="t0",
            input_schema={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
            fn=t0,
            effect="none",
            labels={"confidentiality": tool_label, "integrity": "trusted"},
        )
        if general:
            _general(rt)
        with rt:
            run_id = rt.new_run(RUN)
            if run_label is not None:
                rt.user_input(run_id, "hello", label=Label(confidentiality=run_label))  # type: ignore[arg-type]

            async def play(rt: Runtime = rt, run_id: str = run_id) -> list[Any]:
                return [await rt.acall(raw, run_id=run_id) for raw in calls]

            out = asyncio.run(play())
            views.append(_flow_and_numbers(rt, run_id))
            shown.append([o.__dict__.get(SHOWN_UNDER) for o in out])
    assert views[0] == views[1]
    assert shown[0] == shown[1]
    assert len(views[0]["seen"]) == MAX_REMEMBERED
    assert [k for k, _, _ in views[0]["seen"]][-3:] == ["call_3", "call_1020", "call_1029"]
    assert (shown[0][-1] is not None) == (run_label == "secret")  # shown under a restricting label
    if run_label is None and tool_label == "public":
        assert len(kept) == len(calls) - 2  # all but the first two went through the one frame


FLAT = {
    "type": "object",
    "properties": {
        "a": {"type": "integer"},
        "s": {"type": "string", "description": "some text"},
        "f": {"type": "boolean"},
    },
    "required": ["a", "s", "f"],
    "additionalProperties": False,
}
"""A flat schema: its calls' arguments are taken unasked when each holds exactly its type."""

odd_values = st.sampled_from([1.0, 2.5, -0.0, True, False, None, "x", "", 7, [1], {"k": 1}])


@st.composite
def flat_arguments(draw: st.DrawFn) -> dict[str, Any]:
    """Arguments of :data:`FLAT`: mostly of exactly their types, in any order, some of another
    type (an integral float, a bool for the integer, an int for the boolean), missing or extra."""
    args = {
        "a": draw(st.one_of(st.integers(-(2**70), 2**70), odd_values)),
        "s": draw(st.one_of(st.text(max_size=4), odd_values)),
        "f": draw(st.one_of(st.booleans(), odd_values)),
    }
    args = {key: args[key] for key in draw(st.permutations(list(args)))}
    dropped = draw(st.sampled_from([None, None, None, "a", "s", "f"]))
    if dropped is not None:
        del args[dropped]
    if draw(st.integers(0, 5)) == 0:
        args["extra"] = 1
    return args


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(flat_arguments(), min_size=3, max_size=10))
def test_arguments_of_a_flat_schema_end_calls_as_the_path_it_replaces(calls: list[dict[str, Any]]) -> None:
    async def t0(a: Any, s: Any, f: Any) -> Any:
        return a if type(a) is int else [a, s, f]

    direct, general = _pair(t0, FLAT)
    _same(direct, general, [_entry("t0", args, f"call_{i}") for i, args in enumerate(calls)], lambda rt: None)


def test_plain_arguments_are_taken_without_asking_the_schema(kept: list[tuple[Any, ...]]) -> None:
    """Fault injection: once the entry is built its check fails loudly; arguments of exactly their
    types never reach it, an integral float at the integer still does (and is refused there)."""
    asked: list[Any] = []

    async def t0(a: int, s: str, f: bool) -> int:
        return a + len(s) + f

    def refuse(args: Any) -> bool:
        asked.append(dict(args))
        return False

    def prepare(rt: Runtime) -> None:
        (entry,) = rt.engine.fast._entries.values()
        assert entry.plain == (("a", int), ("s", str), ("f", bool))
        entry.check = refuse

    calls = [_entry("t0", {"a": i, "s": "ab", "f": True}, f"call_{i}") for i in range(5)]
    calls.append(_entry("t0", {"f": False, "a": 9, "s": ""}, "call_order"))
    calls.append(_entry("t0", {"a": 2.0, "s": "", "f": False}, "call_float"))
    direct, _ = _pair(t0, FLAT)
    with direct:
        run_id = direct.new_run(RUN)

        async def play() -> list[Any]:
            out = [await direct.acall(raw, run_id=run_id) for raw in calls[:2]]
            prepare(direct)
            return out + [await direct.acall(raw, run_id=run_id) for raw in calls[2:]]

        observations = asyncio.run(play())
    assert [o.data for o in observations[:6]] == [3, 4, 5, 6, 7, 9]
    assert [record[2] for record in kept] == ["call_2", "call_3", "call_4", "call_order"]
    assert asked and all(args == {"a": 2.0, "s": "", "f": False} for args in asked)  # only the float
    assert observations[6].status == "ok" and observations[6].data == 2  # the stages settle it
