"""The two changes of what a plan's kept entry was decided from that no other test reached
(``actionspace._epoch``; ``tests/plan/test_w16_kept_entry.py`` covers the rest).

- **A run's offer read back from its snapshot**: another process offers the run other tools while
  a plan of it runs here; the next call of the run here merges that snapshot in
  (``RunState.absorb``), and every node of the plan begun after it is judged by the offer now in
  force, as the stages judge it: a tool no longer offered is ``unknown_tool``, never run from the
  entry kept before.
- **``Catalog.drop``** moves nothing a kept entry was decided from: only a retired version is
  dropped, retiring it moved the counter already, and no entry of a retired version is kept after
  that (the run resolves it as ``version_mismatch``); dropping it changes no other resolution
  (``Catalog.current`` skips retired versions). A plan that retires and drops a version mid-plan
  ends as the stages alone end it.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from actionspace import Plan, PlanNode, Runtime
from actionspace._epoch import EPOCH
from actionspace.policy.principal import Principal
from tests.proc import run_child
from tests.proc import url as url  # the fixture

SCHEMA = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
PRINCIPAL = Principal(id="p", scopes=("none:*",))

_OFFER_ELSEWHERE = textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime
    from actionspace.policy.principal import Principal

    url, run = sys.argv[1], sys.argv[2]
    rt = Runtime(url, recover_on_start=False)
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    rt.add_tool(name="look", input_schema=schema, fn=lambda x: x, effect="none")
    rt.add_tool(name="other", input_schema=schema, fn=lambda x: x + 1, effect="none")
    rt.offer(["other"], run_id=run, principal=Principal(id="p", scopes=("none:*",)))  # saved
    rt.close()
    print(json.dumps({"offered": ["other"]}))
    """
)


def _chain(n: int, tool: str) -> Plan:
    nodes = [
        PlanNode(id=f"n{i}", tool=tool, arguments={"x": i}, depends_on=(f"n{i - 1}",) if i else ())
        for i in range(n)
    ]
    return Plan(nodes=nodes, max_concurrency=n)


def _offer_changed_elsewhere(
    url: str, fast: bool
) -> tuple[dict[str, Any], list[tuple[str, bool]], list[int]]:
    """A plan of ``look`` x4 on a run; ``look``'s first call has another process offer the run only
    ``other`` and then reads the run here as any call of it does (the snapshot merged in). The
    nodes' outcomes, each node's path (whether it began after the merge, whether it took a kept
    entry), and the values ``look`` was called with."""
    rt = Runtime(url, recover_on_start=False)
    rt.engine.fast.enabled = fast
    looked: list[int] = []
    merged = [False]
    pins: dict[str, Any] = {}

    async def look(x: int) -> int:
        looked.append(x)
        if x == 0:
            assert run_child(_OFFER_ELSEWHERE, url, "run-offered") == {"offered": ["other"]}
            rt.engine.runs.known("run-offered")  # what a call of the run here does first
            merged[0] = True
            pins.update(rt.engine.run("run-offered").pins)
        return x

    rt.add_tool(name="look", input_schema=SCHEMA, fn=look, effect="none")
    rt.add_tool(name="other", input_schema=SCHEMA, fn=lambda x: x + 1, effect="none")
    paths: list[tuple[str, bool]] = []
    with rt:
        run_id = rt.new_run("run-offered", principal=PRINCIPAL)
        plain = rt.engine.plain_node

        def watched(*args: Any) -> Any:
            began_after = merged[0]
            got = plain(*args)
            paths.append((args[1], began_after and got is not None))
            return got

        rt.engine.plain_node = watched  # type: ignore[method-assign,assignment]
        result = rt.run_plan(_chain(4, "look"), run_id=run_id, principal=PRINCIPAL)
        outcomes = {k: (o.status, o.error.category if o.error else None) for k, o in result.nodes.items()}
    assert pins.keys() == {"other"}  # the stored offer was merged in, in force here
    return outcomes, paths, looked


@pytest.mark.parametrize("fast", [True, False], ids=["kept-entries", "stages"])
def test_an_offer_read_back_from_the_snapshot_mid_plan_is_in_force_for_the_next_node(
    url: str, fast: bool
) -> None:
    outcomes, paths, looked = _offer_changed_elsewhere(url, fast)
    assert outcomes["n0"] == ("ok", None)
    assert outcomes["n1"] == ("error", "unknown_tool"), outcomes  # no longer offered to the run
    assert looked == [0]  # never run after the offer changed
    assert not any(after for _, after in paths)  # no node after the merge ran from a kept entry


def _drop_mid_plan(fast: bool) -> tuple[dict[str, Any], list[int]]:
    """A plan alternating ``old`` (pinned at version 1 by the run) and ``keep``; ``keep``'s first
    call retires and drops ``old@1`` (version 2 is current). The nodes' outcomes and the values
    ``old@1`` ran with."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.engine.fast.enabled = fast
    ran: list[int] = []

    async def old(x: int) -> int:
        ran.append(x)
        return x

    async def keep(x: int) -> int:
        if x == 1:
            rt.catalog.retire("old@1")
            rt.catalog.drop("old@1")
        return x

    rt.add_tool(name="old", input_schema=SCHEMA, fn=old, effect="none", version="1")
    rt.add_tool(name="keep", input_schema=SCHEMA, fn=keep, effect="none")
    with rt:
        run_id = rt.new_run("run-drop", principal=PRINCIPAL)
        assert rt.run_plan(_chain(1, "old"), run_id=run_id, principal=PRINCIPAL).status == "ok"  # pinned
        rt.add_tool(name="old", input_schema=SCHEMA, fn=lambda x: -x, effect="none", version="2")
        nodes = [
            PlanNode(
                id=f"n{i}",
                tool=("old", "keep")[i % 2],
                arguments={"x": i},
                depends_on=(f"n{i - 1}",) if i else (),
            )
            for i in range(6)
        ]
        result = rt.run_plan(Plan(nodes=nodes, max_concurrency=6), run_id=run_id, principal=PRINCIPAL)
        outcomes = {k: (o.status, o.error.category if o.error else None) for k, o in result.nodes.items()}
    return outcomes, ran


def test_a_version_retired_and_dropped_mid_plan_is_never_run_from_a_kept_entry() -> None:
    kept, kept_ran = _drop_mid_plan(fast=True)
    stages, stages_ran = _drop_mid_plan(fast=False)
    assert kept == stages
    assert kept["n2"] == ("error", "version_mismatch"), kept  # the run's pin is gone
    assert kept_ran == stages_ran == [0, 0]  # the first plan's node and the second's first


def test_dropping_a_version_is_only_for_a_retired_one() -> None:
    """What makes ``Catalog.drop`` need no move of the counter: an offered version is never dropped."""
    rt = Runtime("memory://", recover_on_start=False)
    rt.add_tool(name="old", input_schema=SCHEMA, fn=lambda x: x, effect="none", version="1")
    with rt:
        for lifecycle in ("active", "deprecated"):
            if lifecycle == "deprecated":
                rt.catalog.deprecate("old@1")
            with pytest.raises(ValueError, match="only a retired version is dropped"):
                rt.catalog.drop("old@1")
        rt.catalog.retire("old@1")
        epoch = EPOCH[0]
        assert rt.catalog.drop("old@1").key == "old@1"
        assert EPOCH[0] == epoch  # nothing a kept entry was decided from changed
