"""The calls of one model message run together where that changes nothing but the wall time.

A model that proposes several calls in one message (OpenAI's parallel tool calls, Anthropic's
several ``tool_use`` blocks) proposed them all before seeing any result. ``rt.acall_all`` and the
session's ``ahandle`` begin a call's tool without waiting for the calls before it to end when
their read/write sets commute and the call meets the decisions it would meet after them
(pipeline/together.py, ``run_together``). These tests hold it to that: tools that commute
overlap, tools that do not run in the message's order, a label that would change a decision makes
the call wait, and a generated message ends exactly as it ends one call after the other.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.policy.flow_policies import DEFAULT_FLOW_POLICY, AllowAll, FlowPolicy, UntrustedWrites
from tests.pg import fresh_schema
from tests.pipeline.test_fast_effects import _strip  # clocks and approval request ids


def message(*calls: tuple[str, dict[str, Any]]) -> str:
    """One OpenAI assistant message proposing ``calls`` (name, arguments) at once."""
    entries = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        for i, (name, args) in enumerate(calls)
    ]
    return json.dumps({"role": "assistant", "content": None, "tool_calls": entries})


@dataclass
class Timeline:
    """What the tools saw: how many ran at once, and when each began and ended."""

    active: int = 0
    most: int = 0
    spans: dict[str, list[int]] = field(default_factory=dict)
    clock: int = 0

    def begin(self, what: str) -> None:
        self.active += 1
        self.most = max(self.most, self.active)
        self.clock += 1
        self.spans[what] = [self.clock, -1]

    def end(self, what: str) -> None:
        self.active -= 1
        self.clock += 1
        self.spans[what][1] = self.clock

    def overlap(self, a: str, b: str) -> bool:
        (a0, a1), (b0, b1) = self.spans[a], self.spans[b]
        return a0 < b1 and b0 < a1


def _docs_runtime(seen: Timeline, docs: dict[str, str], **kw: Any) -> Runtime:
    rt = Runtime("memory://", **kw)

    @rt.tool(effect="read", reads=["web:{url}"])
    async def fetch(url: str, wait_ms: int = 30) -> str:
        """Fetch a page.

        Args:
            url: the page.
            wait_ms: how long the page takes.
        """
        seen.begin(f"fetch {url}")
        await asyncio.sleep(wait_ms / 1000)
        seen.end(f"fetch {url}")
        return url.upper()

    @rt.tool(effect="write", writes=["doc:{name}"], idempotency="none")
    async def save(name: str, text: str) -> bool:
        """Save a document.

        Args:
            name: the document.
            text: its new text.
        """
        seen.begin(f"save {name} {text}")
        await asyncio.sleep(0.02)
        docs[name] = text
        seen.end(f"save {name} {text}")
        return True

    return rt


def test_the_calls_of_one_message_run_at_once_when_they_commute() -> None:
    seen = Timeline()
    rt = _docs_runtime(seen, {})
    calls = message(("fetch", {"url": "a"}), ("fetch", {"url": "b"}), ("fetch", {"url": "c"}))
    out = asyncio.run(rt.acall_all(calls, run_id=rt.new_run()))
    assert [(o.status, o.data) for o in out] == [("ok", "A"), ("ok", "B"), ("ok", "C")]
    assert seen.most == 3  # one after the other, never more than 1


def test_calls_that_do_not_commute_run_in_the_message_order_and_the_others_beside_them() -> None:
    seen: Timeline = Timeline()
    docs: dict[str, str] = {}
    rt = _docs_runtime(seen, docs)
    run = rt.new_run()
    # A write is judged on the run label: until the run label holds what a save adds (the
    # tool's own label), a save waits for the one before it to be shown, as one after the other.
    asyncio.run(rt.acall_all(message(("save", {"name": "z", "text": "0"})), run_id=run))
    calls = message(
        ("save", {"name": "x", "text": "first"}),
        ("save", {"name": "y", "text": "other"}),
        ("save", {"name": "x", "text": "second"}),
    )
    out = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.status for o in out] == ["ok", "ok", "ok"]
    assert docs == {"z": "0", "x": "second", "y": "other"}
    assert seen.overlap("save x first", "save y other")
    assert not seen.overlap("save x first", "save x second")
    assert seen.spans["save x first"][1] < seen.spans["save x second"][0]
    # both writes of x reached the ledger as two actions, neither replayed nor held as pending
    assert [e.state for e in rt.ledger.list(limit=10)].count("committed") == 4


def test_observations_come_in_the_message_order_whatever_ends_first() -> None:
    seen = Timeline()
    rt = _docs_runtime(seen, {})
    calls = message(*((("fetch", {"url": u, "wait_ms": w})) for u, w in (("a", 60), ("b", 30), ("c", 1))))
    run = rt.new_run()
    out = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.data for o in out] == ["A", "B", "C"]
    assert seen.spans["fetch c"][1] < seen.spans["fetch a"][1]  # c ended first
    events = rt.trace.events(run)
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    for obs in out:  # each call's own events in their order
        kinds = [e.kind for e in events if e.call_id == obs.call_id]
        assert kinds.index("dispatched") < kinds.index("observation")


def test_a_call_whose_decision_reads_a_label_waits_for_the_calls_that_would_change_it() -> None:
    """A secret read, then an external send in the same message: the send is judged on the run
    label with the secret in it, as it is one call after the other, and never runs."""
    sent: list[str] = []

    def build(together: bool) -> Runtime:
        rt = Runtime("memory://", flow_policy=DEFAULT_FLOW_POLICY)

        @rt.tool(effect="read", labels={"confidentiality": "secret"})
        async def read_salary(person: str) -> int:
            """A person's salary.

            Args:
                person: who.
            """
            await asyncio.sleep(0.02)
            return 100

        @rt.tool(effect="external", labels={"sink": True}, idempotency="none")
        async def post(text: str) -> bool:
            """Post publicly.

            Args:
                text: what to post.
            """
            sent.append(text)
            return True

        rt.engine.messages.together = together
        return rt

    calls = message(("read_salary", {"person": "ann"}), ("post", {"text": "hello"}))
    outcomes = []
    for together in (True, False):
        rt = build(together)
        run = rt.new_run()
        # both names resolved by the run first (a post refused at validation sends nothing)
        warm = asyncio.run(rt.acall_all(message(("post", {"text": 5}), ("read_salary", {})), run_id=run))
        assert [o.error and o.error.category for o in warm] == ["invalid_arguments"] * 2
        out = asyncio.run(rt.acall_all(calls, run_id=run))
        outcomes.append([(o.status, o.error and o.error.category) for o in out])
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1][0] != "ok" and sent == []


def test_cancelling_a_message_cancels_every_call_begun_and_keeps_their_events() -> None:
    rt = Runtime("memory://")
    started: list[str] = []
    cancelled: list[str] = []

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

    run = rt.new_run()

    async def main() -> None:
        task = asyncio.create_task(rt.acall_all(message(*(("hang", {"url": u}) for u in "abc")), run_id=run))
        for _ in range(400):  # every call of the message begins at once (within 2 s)
            if len(started) == 3:
                break
            await asyncio.sleep(0.005)
        assert sorted(started) == ["a", "b", "c"]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sorted(cancelled) == ["a", "b", "c"]
    dispatched = {e.call_id for e in rt.trace.events(run) if e.kind == "dispatched"}
    assert len(dispatched) == 3


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


def _generated_runtime(tools: list[Shape], policy: str, together: bool, seen: Timeline) -> Runtime:
    rt = Runtime("memory://", flow_policy=POLICIES[policy])
    for shape in tools:

        async def body(a: int, wait: int = 0, _name: str = shape.name) -> dict[str, Any]:
            what = f"{_name}({a}, {wait})#{len(seen.spans)}"
            seen.begin(what)
            for _ in range(wait):
                await asyncio.sleep(0)
            seen.end(what)
            if a == 3:
                raise RuntimeError("the tool failed")
            return {"tool": _name, "a": a}

        templates = ["res:{a}"] if shape.declared else []
        rt.add_tool(
            name=shape.name,
            input_schema=SCHEMA,
            fn=body,
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
        )
    rt.engine.messages.together = together
    return rt


_valid = st.fixed_dictionaries({"a": st.integers(0, 3), "wait": st.sampled_from([3, 1, 2, 0])})
calls_ = st.tuples(
    st.integers(0, 7),  # the tool: 7 names none, any other one of the tools
    st.integers(0, 5).flatmap(lambda k: _valid if k else st.just({"a": "not a number"})),  # mostly valid
)


def _play(rt: Runtime, messages: list[list[tuple[str, dict[str, Any]]]]) -> dict[str, Any]:
    run = rt.new_run("run-m")

    async def play() -> list[Any]:
        out: list[Any] = []
        for calls in messages:
            out.extend(await rt.acall_all(message(*calls), run_id=run))
        return out

    observations = asyncio.run(play())
    flow = rt.engine.run(run).flow
    events = rt.trace.events(run)
    per_call: dict[str | None, list[Any]] = {}
    for e in events:
        per_call.setdefault(e.call_id, []).append(
            (e.kind, _strip(json.loads(json.dumps(e.data, default=repr))))
        )
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


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tools=st.lists(shapes, min_size=1, max_size=4, unique_by=lambda t: t.name),
    drawn=st.lists(st.lists(calls_, min_size=2, max_size=6), min_size=1, max_size=3),
    policy=st.sampled_from(list(POLICIES)),
)
def test_a_message_run_together_ends_as_it_ends_one_call_after_the_other(
    tools: list[Shape], drawn: list[list[tuple[int, dict[str, Any]]]], policy: str
) -> None:
    """Observations, each call's events, ledger entries and the flow state are the same; no two
    calls whose read/write sets do not commute ever ran at once."""
    names = [t.name for t in tools]
    # every tool called once first: its name resolved, the run label holding its label
    messages = [
        [(t.name, {"a": 0, "wait": 1}) for t in tools],
        *[[("missing" if i == 7 else names[i % len(names)], args) for i, args in m] for m in drawn],
    ]
    seen = Timeline()
    together = _play(_generated_runtime(tools, policy, True, seen), messages)
    apart = _play(_generated_runtime(tools, policy, False, Timeline()), messages)
    assert together == apart
    by_name = {t.name: t for t in tools}
    spans = list(seen.spans)
    for i, a in enumerate(spans):
        for b in spans[i + 1 :]:
            ta, tb = by_name[a.split("(")[0]], by_name[b.split("(")[0]]
            if seen.overlap(a, b):
                assert _commute(ta, a, tb, b), f"{a} and {b} ran at once"


def _commute(ta: Shape, a: str, tb: Shape, b: str) -> bool:
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


@pytest.fixture(params=["sqlite", "postgres"])
def durable_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    """A SQLite file, or an empty schema of the session's throwaway PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
        return
    yield from fresh_schema(request.getfixturevalue("pg_url"))


def test_writes_of_one_message_on_a_durable_store_commit_once_and_a_reproposal_replays_them(
    durable_url: str,
) -> None:
    """Three writes run together on a durable store (on SQLite their intents share commits); the
    model proposing the same message again in the same turn (it timed out waiting) gets each
    answer back from the ledger, and no tool runs twice."""
    sent: list[str] = []
    seen = Timeline()
    rt = Runtime(durable_url)

    @rt.tool(effect="write", writes=["mail:{to}"], idempotency="none")
    async def send_mail(to: str, body: str) -> str:
        """Send an e-mail.

        Args:
            to: the recipient.
            body: the text.
        """
        seen.begin(to)
        await asyncio.sleep(0.05)
        sent.append(to)
        seen.end(to)
        return f"sent to {to}"

    run = rt.new_run()
    # the run sent mail before: its label holds the tool's, so the three writes below run together
    asyncio.run(rt.acall_all(message(("send_mail", {"to": "zed", "body": "hi"})), run_id=run))
    calls = message(*(("send_mail", {"to": to, "body": "hi"}) for to in ("ann", "bob", "cy")))
    first = asyncio.run(rt.acall_all(calls, run_id=run))
    again = asyncio.run(rt.acall_all(calls, run_id=run))
    assert [o.data for o in first] == ["sent to ann", "sent to bob", "sent to cy"]
    assert [o.data for o in again] == [o.data for o in first]
    assert sorted(sent) == ["ann", "bob", "cy", "zed"]
    assert seen.most == 3  # the three writes of the message ran together
    entries = [e for e in rt.ledger.list(limit=10) if e.run_id == run]
    assert sorted(e.state for e in entries) == ["committed"] * 4
    rt.close()


def test_a_message_proposed_again_while_its_calls_still_run_sends_nothing_twice() -> None:
    """The agent loop timed out and the model proposed the same message again while the first
    one's writes were still running: each call of the second waits for its identical action in
    flight and answers what it answered; each write reaches the world once."""
    sent: list[str] = []
    rt = Runtime("memory://")
    release = asyncio.Event()

    @rt.tool(effect="write", writes=["mail:{to}"], idempotency="none")
    async def send_mail(to: str) -> str:
        """Send an e-mail.

        Args:
            to: the recipient.
        """
        sent.append(to)
        if to != "zed":
            await release.wait()
        return f"sent to {to}"

    run = rt.new_run()
    # the run sent mail before: its label holds the tool's, so the three writes below run together
    asyncio.run(rt.acall_all(message(("send_mail", {"to": "zed"})), run_id=run))
    calls = message(*(("send_mail", {"to": to}) for to in ("ann", "bob", "cy")))

    async def main() -> tuple[list[Any], list[Any]]:
        first = asyncio.create_task(rt.acall_all(calls, run_id=run))
        for _ in range(400):
            if len(sent) == 4:
                break
            await asyncio.sleep(0.005)
        assert sorted(sent) == ["ann", "bob", "cy", "zed"]  # the three writes began together
        second = asyncio.create_task(rt.acall_all(calls, run_id=run))
        await asyncio.sleep(0.05)
        assert not second.done()  # waiting for the writes in flight, not sending them again
        release.set()
        return await first, await second

    first, second = asyncio.run(main())
    assert [o.data for o in first] == ["sent to ann", "sent to bob", "sent to cy"]
    assert [o.data for o in second] == [o.data for o in first]
    assert sorted(sent) == ["ann", "bob", "cy", "zed"]


def test_when_deciding_whether_a_call_may_begin_fails_the_call_waits_and_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actionspace.pipeline import together

    def broken(*_: Any) -> bool:
        raise RuntimeError("a bug in the decision")

    monkeypatch.setattr(together, "prepares_alike", broken)
    seen = Timeline()
    rt = _docs_runtime(seen, {})
    calls = message(("fetch", {"url": "a"}), ("fetch", {"url": "b"}))
    out = asyncio.run(rt.acall_all(calls, run_id=rt.new_run()))
    assert [(o.status, o.data) for o in out] == [("ok", "A"), ("ok", "B")]
    assert seen.most == 1  # one after the other
