"""A plain node whose arguments are exactly its tool's flat names and types (``Entry.plain``: a closed
schema of required integers, strings and booleans) is checked by that alone: each ``int`` within the
digits the stages allow, each ``str`` ASCII without U+0000. ``unfit_arguments`` and the compiled
schema are not asked for it (they were, once per node); any other arguments ask both, as before,
and every node ends as it does on the stages alone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Plan, PlanNode, Runtime
from actionspace._json_values import MAX_INT_DIGITS, unfit_arguments
from actionspace.pipeline import fast_nodes
from tests.pipeline.test_fast import _strip

_BIG = 10**MAX_INT_DIGITS  # the first integer the stages refuse


def _runtime(*, fast: bool = True, waits: bool = False) -> Runtime:
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast

    @rt.tool(effect="none")
    async def typed(n: int, s: str, b: bool) -> int:
        if waits:
            await asyncio.sleep(0)
        return (n % 1000) + len(s) + b

    return rt


def _plan(arguments: list[dict[str, Any]], *, chain: bool = True) -> Plan:
    nodes = [
        PlanNode(id=f"n{i}", tool="typed", arguments=args, depends_on=(f"n{i - 1}",) if i and chain else ())
        for i, args in enumerate(arguments)
    ]
    return Plan(nodes=nodes, max_concurrency=len(nodes))


def _play(rt: Runtime, plan: Plan) -> tuple[Any, ...]:
    """The second of two runs of ``plan`` on one run (the first resolves the tool), as read back."""
    run_id = rt.new_run("run-typed")
    for _ in range(2):
        result = rt.run_plan(plan, run_id=run_id)
    nodes = {k: _strip(o.to_dict()) for k, o in result.nodes.items()}
    events: dict[str | None, list[Any]] = {}  # each call's in order (nodes that wait interleave)
    for e in rt.trace.events(run_id):
        events.setdefault(e.call_id, []).append((e.kind, _strip(e.data)))
    flow = rt.engine.run(run_id).flow
    return result.status, nodes, events, flow.context, dict(flow.pending), list(flow.seen)


def _fitting(i: int) -> dict[str, Any]:
    return {"n": i, "s": f"s{i}", "b": bool(i % 2)}


def test_fitting_typed_arguments_ask_neither_unfit_arguments_nor_the_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unfit: list[Any] = []
    schema: list[Any] = []
    original = unfit_arguments  # what the node's call asks, by its module's name

    def asked_unfit(arguments: Any) -> Any:
        unfit.append(arguments)
        return original(arguments)

    monkeypatch.setattr(fast_nodes, "unfit_arguments", asked_unfit)
    with _runtime() as rt:
        run_id = rt.new_run("run-typed")
        assert rt.run_plan(_plan([_fitting(0)]), run_id=run_id).status == "ok"  # builds the entry
        (entry,) = rt.engine.fast._entries.values()
        assert entry.plain == (("n", int), ("s", str), ("b", bool))
        check = entry.check or entry.compiled.validator.is_valid

        def asked_schema(arguments: Any) -> bool:
            schema.append(arguments)
            return bool(check(arguments))

        entry.check = asked_schema
        unfit.clear()
        fitting = [_fitting(i) for i in range(40)]
        # at the edges of what fits: the most digits allowed, ASCII text of every code point but U+0000
        fitting += [
            {"n": _BIG - 1, "s": "", "b": False},
            {"n": 1 - _BIG, "s": "".join(map(chr, range(1, 128))), "b": True},
        ]
        result = rt.run_plan(_plan(fitting), run_id=run_id)
        assert result.status == "ok" and len(result.nodes) == 42
        assert (len(unfit), len(schema)) == (0, 0)  # 42 and 42 while each node asked both
        # anything else asks both, and the stages' answer stands
        odd = [
            {"n": 1, "s": "a\x00b", "b": True},
            {"n": 2, "s": "é", "b": False},
            {"n": True, "s": "", "b": True},
        ]
        result = rt.run_plan(_plan(odd, chain=False), run_id=run_id)
        assert all(any(asked is not args and asked == args for asked in unfit) for args in odd)
        assert result.nodes["n1"].status == "ok" and result.nodes["n1"].data == 3
        assert result.nodes["n0"].status == "error" and result.nodes["n0"].error is not None
        assert result.nodes["n0"].error.category == "invalid_arguments"
        assert result.nodes["n2"].status == "error"  # a bool is no integer


_INTS = st.one_of(
    st.integers(-(10**6), 10**6),
    st.sampled_from([_BIG - 1, _BIG, 1 - _BIG, -_BIG, _BIG * 7]),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
    st.text(max_size=3),
)
_TEXTS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "a\x00b", "\x00", "\ud800", "a\udfff", "é", "plain", "\x7f"]),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
)
_BOOLS = st.one_of(st.booleans(), st.integers(0, 1), st.none(), st.just(1.0), st.just("true"))
_EXTRA = st.sampled_from(["extra", "é", "a\x00", "\ud800", "n2"])


@st.composite
def _arguments(draw: st.DrawFn) -> dict[str, Any]:
    args = {"n": draw(_INTS), "s": draw(_TEXTS), "b": draw(_BOOLS)}
    if draw(st.integers(0, 5)) == 0:
        del args[draw(st.sampled_from(["n", "s", "b"]))]
    if draw(st.integers(0, 5)) == 0:
        args[draw(_EXTRA)] = draw(st.one_of(st.integers(0, 3), st.text(max_size=2)))
    return args


@pytest.mark.parametrize("waits", [False, True])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.one_of(_arguments(), st.integers(0, 99).map(_fitting)), min_size=1, max_size=5),
    st.booleans(),
)
def test_typed_arguments_end_as_on_the_stages(
    waits: bool, arguments: list[dict[str, Any]], chain: bool
) -> None:
    plan = _plan(arguments, chain=chain)
    with _runtime(fast=False, waits=waits) as staged:
        want = _play(staged, plan)
    with _runtime(waits=waits) as rt:
        got = _play(rt, plan)
    assert got == want
