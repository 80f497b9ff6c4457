"""What the message tests share: a message of calls, a timeline of what ran at once, and generated
tools and messages played one call after the other and together (async or sync), compared whole.

Used by ``test_message_together.py`` (the async path) and ``test_message_together_sync.py`` (the
sync path).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy.flow_policies import DEFAULT_FLOW_POLICY, AllowAll, FlowPolicy, UntrustedWrites
from tests.pg import fresh_schema
from tests.pipeline.test_fast_effects import _strip  # clocks and approval request ids

TOGETHER_S = 30.0
"""How long a tool waits for the calls it should run beside to begin (a generous deadline)."""


def message(*calls: tuple[str, dict[str, Any]]) -> str:
    """One OpenAI assistant message proposing ``calls`` (name, arguments) at once."""
    entries = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    return json.dumps({"role": "assistant", "content": None, "tool_calls": entries})


@dataclass
class Timeline:
    """What the tools saw: how many ran at once, and when each began and ended (tools on several
    threads may write to it)."""

    active: int = 0
    most: int = 0
    spans: dict[str, list[int]] = field(default_factory=dict)
    clock: int = 0
    strays: list[str] = field(default_factory=list)
    """Calls of a tool of the caller's thread that ran on another thread."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    changed: threading.Condition = field(init=False)
    """Notified at every begin and end (under ``lock``)."""

    def __post_init__(self) -> None:
        self.changed = threading.Condition(self.lock)

    def begin(self, what: str) -> None:
        with self.lock:
            self.active += 1
            self.most = max(self.most, self.active)
            self.clock += 1
            self.spans[what] = [self.clock, -1]
            self.changed.notify_all()

    def end(self, what: str) -> None:
        with self.lock:
            self.active -= 1
            self.clock += 1
            self.spans[what][1] = self.clock
            self.changed.notify_all()

    def wait_for(self, ready: Callable[[Timeline], bool], timeout: float = TOGETHER_S) -> bool:
        """Block (a tool on a worker thread) until ``ready(self)``; False after ``timeout``.

        A tool that holds on until the calls it should run beside have begun makes "they ran at
        once" certain where a sleep only made it likely (a loaded machine may begin the next call
        after the sleep ended); calls run one after the other instead each wait out ``timeout`` and
        the test fails on the timeline."""
        with self.changed:
            return self.changed.wait_for(lambda: ready(self), timeout)

    async def await_for(self, ready: Callable[[Timeline], bool], timeout: float = TOGETHER_S) -> bool:
        """:meth:`wait_for` from an async tool (polls: the calls it waits for may share its loop)."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if ready(self):
                    return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.001)

    def begun(self, *whats: str) -> Callable[[Timeline], bool]:
        """A condition for :meth:`wait_for`: every one of ``whats`` has begun."""
        return lambda seen: all(w in seen.spans for w in whats)

    def ended(self, what: str) -> Callable[[Timeline], bool]:
        """A condition for :meth:`wait_for`: ``what`` has ended."""
        return lambda seen: what in seen.spans and seen.spans[what][1] != -1

    def at_once(self, n: int) -> Callable[[Timeline], bool]:
        """A condition for :meth:`wait_for`: ``n`` calls have run at once."""
        return lambda seen: seen.most >= n

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


def hanging(rt: Runtime, started: list[str], cancelled: list[str]) -> None:
    """Register ``hang``: a read that waits 30 s, noting when it begins and when it is cancelled."""

    @rt.tool(effect="read", reads=["page:{url}"], timeout_s=120)
    async def hang(url: str) -> str:
        """Wait for a page that never comes.

        Args:
            url: the page.
        """
        started.append(url)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(url)
            raise
        return url


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A SQLite file, or an empty schema of the session's throwaway PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
        return
    yield from fresh_schema(request.getfixturevalue("pg_url"))


# ---------------------------------------------------------------- generated messages

POLICIES: dict[str, FlowPolicy | None] = {
    "default": DEFAULT_FLOW_POLICY,
    "none": None,
    "allow_all": AllowAll(),
    "untrusted_writes": UntrustedWrites(on="deny") & DEFAULT_FLOW_POLICY,
}
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "wait": {"type": "integer"}},
    "required": ["a"],
}
KINDS = ("async", "async", "thread", "thread", "caller")
"""Where a generated tool runs from sync code: the portal loop, a worker thread, the caller's thread."""


@dataclass(frozen=True)
class Shape:
    name: str
    effect: str
    sink: bool
    confidentiality: str
    integrity: str
    declared: bool
    """Its writes (reads) are declared per argument ``a``; else undeclared (everything)."""
    approval: bool
    """A person must approve each call (it is refused with ``needs_approval`` here)."""


shapes = st.builds(
    Shape,
    name=st.sampled_from(["t0", "t1", "t2", "t3"]),
    effect=st.sampled_from(["none", "read", "read", "write", "external"]),
    sink=st.booleans(),
    confidentiality=st.sampled_from(["public", "public", "internal", "secret"]),
    integrity=st.sampled_from(["trusted", "trusted", "untrusted"]),
    declared=st.sampled_from([True, True, False]),
    approval=st.sampled_from([False, False, False, True]),
)
kinds = st.fixed_dictionaries({n: st.sampled_from(KINDS) for n in ("t0", "t1", "t2", "t3")})
_valid = st.fixed_dictionaries({"a": st.integers(0, 3), "wait": st.sampled_from([3, 1, 2, 0])})
calls_ = st.tuples(
    st.integers(0, 7),  # the tool: 7 names none, any other one of the tools
    st.integers(0, 5).flatmap(lambda k: _valid if k else st.just({"a": "not a number"})),  # mostly valid
)


def _body(name: str, kind: str, seen: Timeline) -> Any:
    if kind == "async":

        async def body(a: int, wait: int = 0) -> dict[str, Any]:
            what = f"{name}({a}, {wait})#{len(seen.spans)}"
            seen.begin(what)
            for _ in range(wait):
                await asyncio.sleep(0)
            seen.end(what)
            if a == 3:
                raise RuntimeError("the tool failed")
            return {"tool": name, "a": a}

        return body

    def sync_body(a: int, wait: int = 0) -> dict[str, Any]:
        with seen.lock:
            what = f"{name}({a}, {wait})#{len(seen.spans)}"
            if kind == "caller" and threading.current_thread() is not threading.main_thread():
                seen.strays.append(what)
        seen.begin(what)
        time.sleep(wait / 1000)
        seen.end(what)
        if a == 3:
            raise RuntimeError("the tool failed")
        return {"tool": name, "a": a}

    return sync_body


def generated_runtime(
    tools: list[Shape], policy: str, together: bool, seen: Timeline, kinds: dict[str, str] | None = None
) -> Runtime:
    """A runtime with ``tools`` (each async unless ``kinds`` says where it runs from sync code)."""
    rt = Runtime("memory://", flow_policy=POLICIES[policy])
    for shape in tools:
        kind = "async" if kinds is None else kinds[shape.name]
        templates = ["res:{a}"] if shape.declared else []
        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=_body(shape.name, kind, seen),
            effect=shape.effect,
            reads=templates if shape.effect == "read" else [],
            writes=templates if shape.effect in ("write", "external") else [],
            labels={
                "confidentiality": shape.confidentiality,
                "integrity": shape.integrity,
                "sink": shape.sink,
            },
            idempotency="none",
            requires_approval=shape.approval,
            blocking={"async": None, "thread": True, "caller": False}[kind],
        )
    rt.engine.messages.together = together
    return rt


def play(
    rt: Runtime, messages: list[list[tuple[str, dict[str, Any]]]], *, sync: bool = False
) -> dict[str, Any]:
    """Every message through ``rt.acall_all`` (``sync``: ``rt.call_all``); what must end alike."""
    run = rt.new_run("run-m")

    async def play_async() -> list[Any]:
        out: list[Any] = []
        for calls in messages:
            out.extend(await rt.acall_all(message(*calls), run_id=run))
        return out

    if sync:
        observations = [o for calls in messages for o in rt.call_all(message(*calls), run_id=run)]
    else:
        observations = asyncio.run(play_async())
    flow = rt.engine.run(run).flow
    events = rt.trace.events(run)
    # A request's evidence is written when the request is filed (pipeline/stages.py keep_evidence),
    # labelled with the run label of that moment, which depends on whether the message's calls ran
    # one after the other or together: in a run that filed one, the events' labels are left out.
    filed = any(e.kind == "approval_requested" for e in events)
    per_call: dict[str | None, list[Any]] = {}
    for e in events:
        data = _strip(json.loads(json.dumps(e.data, default=repr)))
        if filed and isinstance(data, dict):
            data.pop("label", None)
        per_call.setdefault(e.call_id, []).append((e.kind, data))
    return {
        "observations": [_strip(o.to_dict()) for o in observations],
        "events": per_call,
        "ledger": sorted(
            (e.node_id, e.key, e.tool, e.state, e.attempts)
            for e in rt.ledger.list(limit=10_000)
            if e.run_id == run
        ),
        "context": flow.context,
        "pending": dict(flow.pending),
        "seen": [(k, lab, repr(data)) for k, (lab, data) in flow.seen.items()],
        "origins": sorted(map(repr, flow.origins())),
    }


def check_together_as_apart(
    tools: list[Shape],
    drawn: list[list[tuple[int, dict[str, Any]]]],
    policy: str,
    kinds: dict[str, str] | None = None,
    *,
    sync: bool = False,
) -> Timeline:
    """Play the drawn messages together and one call after the other: observations, each call's
    events, ledger entries and the flow state are the same, no two calls whose read/write sets do
    not commute ever ran at once, and no tool of the caller's thread ran on another. Returns the
    timeline of the calls run together."""
    names = [t.name for t in tools]
    # every tool called once first: its name resolved, the run label holding its label
    messages = [
        [(t.name, {"a": 0, "wait": 1}) for t in tools],
        *[[("missing" if i == 7 else names[i % len(names)], args) for i, args in m] for m in drawn],
    ]
    seen = Timeline()
    with generated_runtime(tools, policy, True, seen, kinds) as rt:
        together = play(rt, messages, sync=sync)
    with generated_runtime(tools, policy, False, Timeline(), kinds) as rt:
        apart = play(rt, messages, sync=sync)
    assert together == apart
    assert seen.strays == []
    by_name = {t.name: t for t in tools}
    spans = list(seen.spans)
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            ta, tb = by_name[a.split("(")[0]], by_name[b.split("(")[0]]
            if seen.overlap(a, b):
                assert commute(ta, a, tb, b), f"{a} and {b} ran at once"
    return seen


def commute(ta: Shape, a: str, tb: Shape, b: str) -> bool:
    """Whether calls ``a`` and ``b`` of tools ``ta`` and ``tb`` commute (DESIGN §7)."""

    def sets(t: Shape, call: str) -> tuple[set[str], set[str]]:
        arg = call.split("(")[1].split(",")[0]
        mine = {f"res:{arg}"} if t.declared else {"*"}
        if t.effect == "read":
            return mine, set()
        if t.effect in ("write", "external"):
            return set(), mine
        return set(), set()

    (ra, wa), (rb, wb) = sets(ta, a), sets(tb, b)

    def meet(x: set[str], y: set[str]) -> bool:
        return bool(x & y) or ("*" in x and bool(y)) or ("*" in y and bool(x))

    return not (meet(wa, rb | wb) or meet(wb, ra))
