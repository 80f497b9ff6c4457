"""The scheduler's ready queue: taking every queued node at once gives them in the order popping
them one by one gives, each once, whatever was queued, removed and queued again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from actionspace import Plan, Runtime
from actionspace.plan.check import CheckedPlan, check_plan
from actionspace.plan.ready import ReadyQueue


def _checked(edges: list[tuple[int, int]], n: int) -> CheckedPlan:
    rt = Runtime("memory://")

    @rt.tool(effect="none")
    def noop(x: int) -> int:
        return x

    depends: dict[int, list[str]] = {}
    for a, b in edges:
        if a < b:
            depends.setdefault(b, []).append(f"n{a}")
    nodes = [
        {"id": f"n{i}", "tool": "noop", "arguments": {"x": i}, "depends_on": sorted(set(depends.get(i, [])))}
        for i in range(n)
    ]
    spec = rt.engine.catalog.get("noop")
    checked = check_plan(Plan.from_dict({"nodes": nodes}), lambda _name: spec, rt.principal)
    assert isinstance(checked, CheckedPlan)
    return checked


@given(
    n=st.integers(1, 12),
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=20),
    steps=st.lists(st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 11)), max_size=30),
)
def test_taking_every_ready_node_at_once_is_popping_them_one_by_one(
    n: int, edges: list[tuple[int, int]], steps: list[tuple[str, int]]
) -> None:
    plan = _checked([(a, b) for a, b in edges if a < n and b < n], n)
    queues = ReadyQueue(plan), ReadyQueue(plan)
    for op, i in steps:
        k = f"n{i % n}"
        for q in queues:
            if op == "add":
                q.extend([k])
            else:
                q.remove(k)
    one_by_one = []
    while queues[0].queued:
        one_by_one.append(queues[0].pop())
    assert queues[1].take_all() == one_by_one
    assert not queues[1].queued and len(queues[1]) == 0


def test_nodes_sharing_a_listing_index_are_ordered_by_id() -> None:
    """A ready queue's keys are one integer per node; two nodes of one listing index (none in a
    checked plan, which numbers nodes by their place) still come out in (chain, index, id) order."""
    plan = _checked([(0, 1)], 4)
    for c in plan.nodes.values():
        c.index = 0
    q = ReadyQueue(plan)
    q.extend(["n3", "n2", "n1", "n0"])
    assert q.take_all() == ["n0", "n1", "n2", "n3"]  # n0 heads a chain of two; the rest by id
    q.extend(["n2", "n3", "n1"])
    assert [q.pop(), q.pop(), q.pop()] == ["n1", "n2", "n3"]


@given(
    n=st.integers(1, 12),
    edges=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=20),
    steps=st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "pop", "take_all"]),
            st.lists(st.integers(0, 11), max_size=4),
        ),
        max_size=40,
    ),
)
def test_popping_between_queuing_gives_the_best_queued_node_each_time(
    n: int, edges: list[tuple[int, int]], steps: list[tuple[str, list[int]]]
) -> None:
    """Queued nodes reach the heap only when one is popped: whatever was queued, removed, queued
    twice or taken meanwhile, each pop gives the queued node of the lowest key, and each node once."""
    plan = _checked([(a, b) for a, b in edges if a < n and b < n], n)
    q = ReadyQueue(plan)
    model: set[str] = set()
    for op, picks in steps:
        ks = [f"n{i % n}" for i in picks]
        if op == "add":
            q.extend(ks)
            model.update(ks)
        elif op == "remove":
            for k in ks:
                q.remove(k)
                model.discard(k)
        elif op == "pop" and model:
            best = min(model, key=q.key.__getitem__)
            assert q.pop() == best
            model.discard(best)
        elif op == "take_all":
            assert q.take_all() == sorted(model, key=q.key.__getitem__)
            model.clear()
        assert q.queued == model and len(q) == len(model)
    while model:
        best = min(model, key=q.key.__getitem__)
        assert q.pop() == best
        model.discard(best)
    assert not q.queued
