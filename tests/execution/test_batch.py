"""Batch tools: per-item, all-or-nothing and chunked modes, partial failure, retries, approvals."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace.catalog.spec import NO_RETRY, ToolSpec
from actionspace.errors import ToolDefinitionError, ToolError
from actionspace.execution.batch import count_items
from actionspace.ledger.keys import idempotency_key
from actionspace.testing import Faulty
from actionspace.types import Observation

ITEM = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "amount": {"type": "integer"}},
}
SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": ITEM}, "note": {"type": "string"}},
    "required": ["items"],
}


class Sender:
    """Counts sends per item id; items in ``fail_first`` fail (``conflict``) on their first send only."""

    def __init__(self, fail_first: Sequence[str] = (), fail_always: Sequence[str] = ()) -> None:
        self.fail_first = set(fail_first)
        self.fail_always = set(fail_always)
        self.sends: Counter[str] = Counter()
        self.commits: Counter[str] = Counter()
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def __call__(self, items: list[dict[str, Any]], note: str = "") -> list[dict[str, Any]]:
        ids = [str(item.get("id")) for item in items]
        with self._lock:
            self.calls.append(ids)
            for i in ids:
                self.sends[i] += 1
            bad = [i for i in ids if i in self.fail_always or (i in self.fail_first and self.sends[i] == 1)]
            if not bad:
                self.commits.update(ids)
        if bad:
            raise ToolError("conflict", f"cannot send {', '.join(bad)}")
        return [{"sent": i} for i in ids]


def _items(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, "amount": n} for n, i in enumerate(ids)]


def _call(items: list[Any], **extra: Any) -> ToolCall:
    return ToolCall(name="send", arguments={"items": items, **extra})


def _runtime(store: str, sender: Any, **spec: Any) -> Runtime:
    rt = Runtime(store, recover_on_start=False)
    spec.setdefault("batch", "per_item")
    rt.add_tool(name="send", input_schema=SCHEMA, fn=sender, effect="write", **spec)
    return rt


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'batch.db'}"


def _keys(obs: Observation) -> list[str]:
    return [o.call_id.rpartition("#")[2] for o in obs.items]


# ---------------------------------------------------------------------- per_item


def test_per_item_batch_reports_partial_naming_exactly_the_failed_items(store: str) -> None:
    sender = Sender(fail_always=["b", "d"])
    with _runtime(store, sender) as rt:
        obs = rt.call(_call(_items("a", "b", "c", "d")), run_id="r1", node_id="n1")
    assert obs.status == "partial"
    assert obs.error is None
    assert obs.diagnostics["failed_items"] == [
        {"key": "b", "category": "conflict"},
        {"key": "d", "category": "conflict"},
    ]
    assert [o.status for o in obs.items] == ["ok", "error", "ok", "error"]
    assert [o.call_id for o in obs.items] == ["r1:n1#a", "r1:n1#b", "r1:n1#c", "r1:n1#d"]
    assert obs.items[0].data == [{"sent": "a"}]
    assert sender.calls == [["a"], ["b"], ["c"], ["d"]]


def test_per_item_batch_where_every_item_succeeds_is_ok(store: str) -> None:
    with _runtime(store, Sender()) as rt:
        obs = rt.call(_call(_items("a", "b")), run_id="r1", node_id="n1")
    assert obs.status == "ok"
    assert obs.diagnostics["failed_items"] == []
    assert _keys(obs) == ["a", "b"]


def test_per_item_batch_where_every_item_fails_is_an_error_with_the_first_failure() -> None:
    with _runtime("memory://", Sender(fail_always=["a", "b"])) as rt:
        obs = rt.call(_call(_items("a", "b")), run_id="r1", node_id="n1")
    assert obs.status == "error"
    assert obs.error is not None and obs.error.category == "conflict"
    assert "all 2 items failed" in obs.error.message
    assert [f["key"] for f in obs.diagnostics["failed_items"]] == ["a", "b"]


def test_each_item_commits_under_its_own_idempotency_key() -> None:
    items = _items("a", "b")
    with _runtime("memory://", Sender()) as rt:
        obs = rt.call(_call(items, note="x"), run_id="r1", node_id="n1")
        keys = [o.diagnostics["idempotency_key"] for o in obs.items]
        expected = [
            idempotency_key("r1", f"n1#{item['id']}", "send@1", {"items": [item], "note": "x"})
            for item in items
        ]
        assert keys == expected
        for key, item in zip(keys, items, strict=True):
            entry = rt.ledger.get(key)
            assert entry is not None and entry.state == "committed"
            assert entry.node_id == f"n1#{item['id']}"


def test_items_without_an_id_are_keyed_by_their_index() -> None:
    sent: list[Any] = []

    def send(items: list[Any]) -> str:
        sent.extend(items)
        return "ok"

    with Runtime("memory://", recover_on_start=False) as rt:
        schema = {"type": "object", "properties": {"items": {"type": "array"}}}
        rt.add_tool(name="send", input_schema=schema, fn=send, effect="write", batch="per_item")
        obs = rt.call(_call([{"key": "k"}, 5, {"name": "x"}]), run_id="r1", node_id="n1")
    assert obs.status == "ok"
    assert _keys(obs) == ["k", "1", "2"]
    assert sent == [{"key": "k"}, 5, {"name": "x"}]


def test_async_items_are_ordered_as_given_not_as_they_complete() -> None:
    last_done = asyncio.Event()
    finished: list[str] = []

    async def send(items: list[dict[str, Any]]) -> str:
        name = str(items[0]["id"])
        if name == "a":  # the first item finishes only after the last one
            await asyncio.wait_for(last_done.wait(), timeout=5)
        finished.append(name)
        if name == "c":
            last_done.set()
        return name

    async def main() -> Observation:
        with _runtime("memory://", send) as rt:
            return await rt.acall(_call(_items("a", "b", "c")), run_id="r1", node_id="n1")

    obs = asyncio.run(main())
    assert finished[-1] == "a"
    assert obs.status == "ok"
    assert [o.data for o in obs.items] == ["a", "b", "c"]
    assert _keys(obs) == ["a", "b", "c"]


# ---------------------------------------------------------------------- retries


def test_calling_the_node_again_resends_only_the_failed_items(store: str) -> None:
    sender = Sender(fail_first=["b", "d"])
    items = _items("a", "b", "c", "d")
    rt = _runtime(store, sender)
    first = rt.call(_call(items), run_id="r1", node_id="n1")
    assert [f["key"] for f in first.diagnostics["failed_items"]] == ["b", "d"]
    if store != "memory://":  # a durable ledger answers a new process the same way
        rt.close()
        rt = _runtime(store, sender)
    with rt:
        second = rt.call(_call(items), run_id="r1", node_id="n1")
        third = rt.call(_call(items), run_id="r1", node_id="n1")
    assert second.status == "ok"
    assert [bool(o.diagnostics.get("replayed")) for o in second.items] == [True, False, True, False]
    assert third.status == "ok"
    assert all(o.diagnostics.get("replayed") for o in third.items)
    assert sender.sends == {"a": 1, "b": 2, "c": 1, "d": 2}
    resent = idempotency_key("r1", "n1#b~2", "send@1", {"items": [items[1]]})
    assert second.items[1].diagnostics["idempotency_key"] == resent


def test_an_item_that_failed_transiently_is_sent_again_under_the_same_key() -> None:
    items = _items("a", "b")
    sends: Counter[str] = Counter()

    def send(items: list[dict[str, Any]]) -> str:
        name = str(items[0]["id"])
        sends[name] += 1
        if name == "b" and sends[name] == 1:
            raise ToolError("transient", "try again")
        return name

    with _runtime("memory://", send, retry=NO_RETRY) as rt:
        first = rt.call(_call(items), run_id="r1", node_id="n1")
        second = rt.call(_call(items), run_id="r1", node_id="n1")
        key = idempotency_key("r1", "n1#b", "send@1", {"items": [items[1]]})
        entry = rt.ledger.get(key)
    assert first.diagnostics["failed_items"] == [{"key": "b", "category": "transient"}]
    assert second.status == "ok"
    assert second.items[1].diagnostics["idempotency_key"] == key
    assert entry is not None and entry.state == "committed" and entry.attempts == 2
    assert sends == {"a": 1, "b": 2}


def test_async_retry_resends_only_the_failed_items() -> None:
    sender = Sender(fail_first=["c"])

    async def main() -> list[Observation]:
        with _runtime("memory://", sender) as rt:
            return [await rt.acall(_call(_items("a", "b", "c")), run_id="r1", node_id="n1") for _ in range(3)]

    statuses = [o.status for o in asyncio.run(main())]
    assert statuses == ["partial", "ok", "ok"]
    assert sender.sends == {"a": 1, "b": 1, "c": 2}


# ---------------------------------------------------------------------- all_or_nothing


def test_all_or_nothing_sends_every_item_in_one_call_under_one_key() -> None:
    sender = Sender()
    items = _items("a", "b", "c")
    with _runtime("memory://", sender, batch="all_or_nothing") as rt:
        obs = rt.call(_call(items), run_id="r1", node_id="n1")
        entries = rt.ledger.list()
    assert sender.calls == [["a", "b", "c"]]
    assert obs.status == "ok"
    assert obs.call_id == "r1:n1"
    assert obs.diagnostics["idempotency_key"] == idempotency_key("r1", "n1", "send@1", {"items": items})
    assert [e.node_id for e in entries] == ["n1"]
    assert [o.data for o in obs.items] == [{"sent": "a"}, {"sent": "b"}, {"sent": "c"}]
    assert _keys(obs) == ["a", "b", "c"]


def test_all_or_nothing_maps_a_result_keyed_by_item_key_to_its_items() -> None:
    def send(items: list[dict[str, Any]]) -> dict[str, int]:
        return {item["id"]: item["amount"] * 10 for item in reversed(items)}

    with _runtime("memory://", send, batch="all_or_nothing") as rt:
        obs = rt.call(_call(_items("a", "b", "c")), run_id="r1", node_id="n1")
    assert [o.data for o in obs.items] == [0, 10, 20]


def test_all_or_nothing_with_a_result_not_split_per_item_is_a_single_observation() -> None:
    def send(items: list[dict[str, Any]]) -> dict[str, int]:
        return {"total": sum(item["amount"] for item in items)}

    with _runtime("memory://", send, batch="all_or_nothing") as rt:
        obs = rt.call(_call(_items("a", "b", "c")), run_id="r1", node_id="n1")
    assert obs.status == "ok"
    assert obs.data == {"total": 3}
    assert obs.items == ()


def test_all_or_nothing_failure_fails_every_item_and_retry_sends_the_whole_batch_again() -> None:
    sender = Sender()
    faulty = Faulty(sender, ["permanent"])
    items = _items("a", "b")
    with _runtime("memory://", faulty.tool, batch="all_or_nothing") as rt:
        first = rt.call(_call(items), run_id="r1", node_id="n1")
        second = rt.call(_call(items), run_id="r1", node_id="n1")
        third = rt.call(_call(items), run_id="r1", node_id="n1")
    assert first.status == "error"
    assert first.error is not None and first.error.category == "permanent"
    assert [o.status for o in first.items] == ["error", "error"]
    assert first.diagnostics["failed_items"] == [
        {"key": "a", "category": "permanent"},
        {"key": "b", "category": "permanent"},
    ]
    assert second.status == "ok" and third.status == "ok"
    assert third.diagnostics.get("replayed") is True
    assert faulty.calls == 2 and faulty.commits == 1


# ---------------------------------------------------------------------- chunked


def test_chunked_batch_fails_only_the_chunks_that_failed() -> None:
    sender = Sender(fail_always=["c"])
    with _runtime("memory://", sender, batch="chunked", chunk_size=2) as rt:
        obs = rt.call(_call(_items("a", "b", "c", "d", "e")), run_id="r1", node_id="n1")
    assert sender.calls == [["a", "b"], ["c", "d"], ["e"]]
    assert obs.status == "partial"
    assert obs.diagnostics["failed_items"] == [
        {"key": "c", "category": "conflict"},
        {"key": "d", "category": "conflict"},
    ]
    assert [o.status for o in obs.items] == ["ok", "ok", "error", "error", "ok"]
    assert [o.data for o in obs.items] == [{"sent": "a"}, {"sent": "b"}, None, None, {"sent": "e"}]
    assert obs.items[4].diagnostics["chunk"] == "chunk2"


def test_chunked_retry_resends_only_the_failed_chunk() -> None:
    sender = Sender(fail_first=["c"])
    items = _items("a", "b", "c", "d", "e")
    with _runtime("memory://", sender, batch="chunked", chunk_size=2) as rt:
        first = rt.call(_call(items), run_id="r1", node_id="n1")
        second = rt.call(_call(items), run_id="r1", node_id="n1")
    assert (first.status, second.status) == ("partial", "ok")
    assert sender.calls == [["a", "b"], ["c", "d"], ["e"], ["c", "d"]]


# ---------------------------------------------------------------------- checks


def test_more_items_than_max_items_is_invalid_arguments_at_the_items_argument() -> None:
    sender = Sender()
    with _runtime("memory://", sender, max_items=2) as rt:
        obs = rt.call(_call(_items("a", "b", "c")), run_id="r1", node_id="n1")
    assert obs.status == "error" and obs.error is not None
    assert obs.error.category == "invalid_arguments"
    assert [f.path for f in obs.error.field_errors] == ["/items"]
    assert "at most 2 items" in obs.error.field_errors[0].message
    assert sender.calls == []


def test_duplicate_item_keys_are_invalid_arguments_naming_the_items() -> None:
    sender = Sender()
    with _runtime("memory://", sender) as rt:
        obs = rt.call(_call([*_items("a", "b"), {"id": "a"}]), run_id="r1", node_id="n1")
    assert obs.error is not None and obs.error.category == "invalid_arguments"
    assert [f.path for f in obs.error.field_errors] == ["/items/0", "/items/2"]
    assert obs.error.details["duplicate_keys"] == {"a": [0, 2]}
    assert "'a' (items 0, 2)" in obs.error.message
    assert sender.calls == []


def test_batch_options_are_checked_when_the_tool_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="chunk_size"):
        ToolSpec(name="t", effect="write", batch="chunked")
    with pytest.raises(ToolDefinitionError, match="chunk_size"):
        ToolSpec(name="t", effect="write", batch="per_item", chunk_size=3)
    with pytest.raises(ToolDefinitionError, match="batch must be"):
        ToolSpec(name="t", effect="write", batch="some")  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="no argument 'rows'"):
        ToolSpec(name="t", effect="write", input_schema=SCHEMA, batch="per_item", items_arg="rows")


def test_the_tool_decorator_accepts_batch_options() -> None:
    with Runtime("memory://", recover_on_start=False) as rt:

        @rt.tool(effect="write", batch="chunked", items_arg="rows", chunk_size=2, max_items=10)
        def save(rows: list[int]) -> int:
            """Save rows."""
            return sum(rows)

        spec = rt.catalog.current("save")
        assert spec is not None
        assert (spec.batch, spec.items_arg, spec.chunk_size) == ("chunked", "rows", 2)
        obs = rt.call(ToolCall(name="save", arguments={"rows": [1, 2, 3]}), run_id="r1", node_id="n1")
    assert obs.status == "ok"
    assert obs.data == [3, 3]
    assert _keys(obs) == ["0", "1", "2"]


def test_count_items_counts_a_batch_calls_items_and_any_other_call_as_one() -> None:
    batch = ToolSpec(name="t", effect="write", batch="per_item")
    assert count_items(batch, {"items": [1, 2, 3]}) == 3
    assert count_items(batch, {}) == 0
    assert count_items(ToolSpec(name="u", effect="write"), {"items": [1, 2]}) == 1


# ---------------------------------------------------------------------- approvals


def test_an_approval_request_of_a_batch_previews_every_item_with_its_key(store: str) -> None:
    sender = Sender()
    items = _items(*(f"i{n}" for n in range(7)))
    with _runtime(store, sender, requires_approval=True, writes=("payment:{id}",)) as rt:
        held = rt.call(_call(items), run_id="r1", node_id="n1")
        assert held.error is not None and held.error.category == "needs_approval"
        (request,) = rt.approvals.list()
        preview = request.details["items"]
        assert [p["key"] for p in preview] == [f"i{n}" for n in range(7)]
        assert [p["item"] for p in preview] == items
        assert [p["writes"] for p in preview] == [[f"payment:i{n}"] for n in range(7)]
        assert len(held.error.details["items"]) == 7
        assert sender.calls == []
        rt.approvals.approve(request.id, by="alice")
        obs = rt.call(_call(items), run_id="r1", node_id="n1")
    assert obs.status == "ok"
    assert len(obs.items) == 7


# ---------------------------------------------------------------------- property


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ids=st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=8, unique=True),
    data=st.data(),
    retries=st.integers(min_value=1, max_value=3),
    use_async=st.booleans(),
)
def test_failed_items_are_exactly_the_injected_failures_and_no_success_is_sent_twice(
    ids: list[str], data: st.DataObject, retries: int, use_async: bool
) -> None:
    fail_first = data.draw(st.sets(st.sampled_from(ids)))
    fail_always = data.draw(st.sets(st.sampled_from(ids)))
    sender = Sender(fail_first=sorted(fail_first), fail_always=sorted(fail_always))
    items = _items(*ids)
    with _runtime("memory://", sender) as rt:

        def call() -> Observation:
            if use_async:
                return asyncio.run(rt.acall(_call(items), run_id="r", node_id="n"))
            return rt.call(_call(items), run_id="r", node_id="n")

        observations = [call() for _ in range(1 + retries)]
    injected = fail_first | fail_always
    for n, obs in enumerate(observations):
        expected = injected if n == 0 else fail_always
        assert {f["key"] for f in obs.diagnostics["failed_items"]} == expected
        assert _keys(obs) == ids
        assert obs.status == _status(len(expected), len(ids))
    succeeded = set(ids) - fail_always
    assert {i: sender.commits[i] for i in ids} == {i: int(i in succeeded) for i in ids}
    assert all(sender.sends[i] == (2 if i in fail_first else 1) for i in succeeded)
    assert all(sender.sends[i] == 1 + retries for i in fail_always)


def _status(failed: int, total: int) -> str:
    return "ok" if failed == 0 else ("error" if failed == total else "partial")
