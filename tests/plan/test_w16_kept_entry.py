"""A plan keeps each tool's precompiled entry once per plan and tool (``pipeline/fast_nodes.py``,
``Scheduler.kept``), behind one counter of everything the entry was decided from
(``actionspace._epoch.EPOCH``): the run's resolutions and the offer's disclosure, the catalog, the
flow policy, the engine's stages, its guard and its cursor key. Every such change moves the
counter, so a tool that changes one of them mid-plan is seen by the very next node (a later wave),
and so is a change between two plans: the nodes after it take the stages, and end as the stages
alone (the precompiled path switched off) end them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from actionspace import Plan, PlanNode, Runtime
from actionspace._epoch import EPOCH
from actionspace.errors import ActionError
from actionspace.execution.guarded import Guard
from actionspace.observation.pagination import CursorKey
from actionspace.pipeline import fast_nodes
from actionspace.policy.flow_policies import ReadClearance
from actionspace.policy.principal import Principal
from tests.pipeline.test_fast import _strip

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
SECRET = {"confidentiality": "secret"}
CHANGES = ("policy", "stage", "guard", "register", "retire", "offer", "disclosure", "cursor_key")


class _Closed(Guard):
    """A guard that admits nothing: a call it sees ends ``budget_exceeded``."""

    __slots__ = ()

    def admit(self, *args: Any, **kwargs: Any) -> ActionError:
        return ActionError.of("budget_exceeded", "closed")


def _change(rt: Runtime, run_id: str, change: str) -> None:
    """Change one thing a precompiled entry of ``secret`` was decided from, as a tool may."""
    if change == "policy":
        rt.flow_policy = ReadClearance()  # a secret result is refused to this principal's run
    elif change == "stage":
        rt.engine.add_stage(lambda _inp, _draft: ActionError.of("policy_violation", "closed"))
    elif change == "guard":
        rt.engine.set_guard(_Closed(meter=None, cache=None))
    elif change == "register":  # a new version: the run's resolution is made again
        rt.add_tool(
            name="secret", input_schema=SCHEMA, fn=lambda x: -x, effect="none", version="2", labels=SECRET
        )
    elif change == "retire":
        rt.catalog.retire("secret@1")
    elif change == "offer":  # the run's resolutions dropped: ``secret`` is no longer offered
        rt.offer(["other"], run_id=run_id)
    elif change == "disclosure":
        rt.offer(["secret", "other"], run_id=run_id, disclosure=True)
    else:
        rt.engine.stages.cursor_key = CursorKey(b"k" * 32)


def _chain(n: int, tools: tuple[str, ...] = ("secret",)) -> Plan:
    """``n`` nodes, each after the one before (each its own wave), cycling through ``tools``."""
    nodes = [
        PlanNode(
            id=f"n{i}", tool=tools[i % len(tools)], arguments={"x": i}, depends_on=(f"n{i - 1}",) if i else ()
        )
        for i in range(n)
    ]
    return Plan(nodes=nodes, max_concurrency=n)


def _played(
    fast: bool, change: str, at: int, first: int, second: int, tools: tuple[str, ...], between: bool
) -> tuple[Any, ...]:
    """Two plans on one run; the ``at``-th call of the second plan's ``secret`` tool (or, with
    ``between``, the moment between the two plans) makes ``change``. The results, events and
    flow state as read back, and in order: each check of ``secret``'s entry (``check``, whether
    after the change) and each ``secret`` node of the second plan (``node``, whether it began
    after the change, whether it took the precompiled path)."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast
    calls = [0]  # the second plan's calls of ``secret`` (-1: the first plan's)
    run: list[str] = []
    paths: list[tuple[str, bool, bool]] = []
    changed = [False]

    async def secret(x: int) -> int:
        if calls[0] < 0:
            return x
        calls[0] += 1
        if not between and calls[0] == at:
            _change(rt, run[0], change)
            changed[0] = True
        return x

    rt.add_tool(name="secret", input_schema=SCHEMA, fn=secret, effect="none", version="1", labels=SECRET)
    rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x + 1, effect="none")

    with rt:
        run_id = rt.new_run("run-kept", principal=Principal(id="p", scopes=("none:*",)))
        run.append(run_id)
        calls[0] = -1
        rt.run_plan(_chain(first, tools), run_id=run_id)  # resolves the tools, builds their entries
        calls[0] = 0
        if between:
            _change(rt, run_id, change)
            changed[0] = True
        plain = rt.engine.plain_node

        def watched(*args: Any) -> Any:
            began_after = changed[0]
            got = plain(*args)
            if args[1] == "secret":
                paths.append(("node", began_after, got is not None))
            return got

        def checked(engine: Any, run: Any, name: str, *args: Any) -> Any:
            if name == "secret":
                paths.append(("check", changed[0], True))
            return entry_of(engine, run, name, *args)

        rt.engine.plain_node = watched  # type: ignore[method-assign,assignment]
        entry_of, fast_nodes._entry = fast_nodes._entry, checked  # type: ignore[assignment]
        try:
            result = rt.run_plan(_chain(second, tools), run_id=run_id)
        finally:
            fast_nodes._entry = entry_of
        nodes = {k: _strip(o.to_dict()) for k, o in result.nodes.items()}
        events = [(e.seq, e.kind, e.call_id, _strip(e.data)) for e in rt.trace.events(run_id)]
        flow = rt.engine.run(run_id).flow
        return result.status, nodes, events, flow.context, dict(flow.pending), paths


def _seen(paths: list[tuple[str, bool, bool]]) -> bool:
    """Every ``secret`` node begun before the change took the precompiled path, and none begun
    after it ran on an entry checked before the change: a node after it takes the stages, or an
    entry checked anew after the change (a tool of a new version resolved, a policy that allows it)."""
    checked_after = False
    for kind, after, precompiled in paths:
        if kind == "check":
            checked_after = checked_after or after
            continue
        # before the change: its tool's entry, kept; after it: never an entry checked before it
        if (precompiled and not checked_after) if after else not precompiled:
            return False
    return True


@pytest.mark.parametrize("change", CHANGES)
def test_each_change_an_entry_was_decided_from_moves_the_epoch(change: str) -> None:
    with Runtime("memory://", recover_on_start=False) as rt:
        rt.add_tool(name="secret", input_schema=SCHEMA, fn=lambda x: x, effect="none", labels=SECRET)
        rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x, effect="none")
        run_id = rt.new_run("run-epoch")
        before = EPOCH[0]
        _change(rt, run_id, change)
        assert EPOCH[0] > before


@pytest.mark.parametrize("change", CHANGES)
@pytest.mark.parametrize("between", [False, True])
def test_a_change_mid_plan_or_between_plans_is_seen_by_every_node_after_it(
    change: str, between: bool
) -> None:
    """The nodes after the change take the stages (the kept entry is checked again and no longer
    qualifies) and end exactly as on the stages alone; the nodes before it took the kept entry."""
    tools = ("secret",)
    fast = _played(True, change, 4, 3, 8, tools, between)
    staged = _played(False, change, 4, 3, 8, tools, between)
    assert fast[:5] == staged[:5]
    # (a plan checked after the catalog or the offer changed may be refused before any node)
    assert _seen(fast[5])
    assert [after for kind, after, _ in fast[5] if kind == "node"].count(False) == (0 if between else 4)
    if change in ("policy", "stage", "guard", "retire", "offer"):  # refused on the stages
        assert fast[0] != "ok"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    change=st.sampled_from(CHANGES),
    at=st.integers(1, 6),
    first=st.integers(1, 4),
    second=st.integers(1, 9),
    tools=st.sampled_from([("secret",), ("secret", "other"), ("other", "secret", "secret")]),
    between=st.booleans(),
)
def test_kept_entries_end_as_the_stages_whatever_changes_and_when(
    change: str, at: int, first: int, second: int, tools: tuple[str, ...], between: bool
) -> None:
    fast = _played(True, change, at, first, second, tools, between)
    assert fast[:5] == _played(False, change, at, first, second, tools, between)[:5]
    assert _seen(fast[5])


def test_a_plan_checks_each_tools_entry_once_while_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry is checked (``fast_nodes._entry``) once per plan and tool, not once per node."""
    from actionspace.pipeline import fast_nodes

    checked: list[str] = []
    original: Callable[..., Any] = fast_nodes._entry

    def spy(engine: Any, run: Any, name: str, *args: Any) -> Any:
        checked.append(name)
        return original(engine, run, name, *args)

    monkeypatch.setattr(fast_nodes, "_entry", spy)
    with Runtime("memory://", recover_on_start=False) as rt:
        rt.add_tool(name="secret", input_schema=SCHEMA, fn=lambda x: x, effect="none")
        rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x + 1, effect="none")
        run_id = rt.new_run("run-once")
        rt.run_plan(_chain(4, ("secret", "other")), run_id=run_id)
        checked.clear()
        result = rt.run_plan(_chain(60, ("secret", "other")), run_id=run_id)
    assert result.status == "ok"
    assert [o.data for o in result.nodes.values()] == [i + (i % 2) for i in range(60)]
    assert sorted(checked) == ["other", "secret"]
