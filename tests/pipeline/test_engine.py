"""The call engine: ordered stages with a seam for user stages, and the one rule for pending actions."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actionspace import ActionError, Principal, Runtime, ToolCall
from actionspace.pipeline import CallInput, Draft
from tests.pg import fresh_schema


def no_weekend_payments(inp: CallInput, draft: Draft) -> ActionError | None:
    """A business rule as a stage: it sees the normalized arguments."""
    assert draft.checked is not None and draft.spec is not None
    if draft.spec.name == "pay" and draft.checked.arguments.get("day") in ("sat", "sun"):
        return ActionError.of("policy_violation", "no payments at weekends")
    return None


def _runtime(**options: Any) -> tuple[Runtime, list[int]]:
    rt = Runtime("memory://", **options)
    paid: list[int] = []

    @rt.tool(effect="external", requires_approval=True, scopes=["payments:send"])
    def pay(to: str, cents: int, day: str = "mon") -> int:
        """Pay someone."""
        paid.append(cents)
        return cents

    return rt, paid


def test_a_user_stage_rejects_after_validation_and_before_any_approval_is_filed() -> None:
    rt, paid = _runtime(stages=[no_weekend_payments])
    obs = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 5, "day": "sun"}))
    assert obs.error is not None and obs.error.category == "policy_violation"
    assert rt.approvals.list() == [] and paid == []
    held = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 5}))
    assert held.error is not None and held.error.category == "needs_approval"


def test_authorization_is_traced_before_validation_and_ends_the_call() -> None:
    rt, _ = _runtime()
    run = rt.new_run(principal=Principal(id="intern", scopes=("read:*",)))
    obs = rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": "not a number"}), run_id=run)
    assert obs.error is not None and obs.error.category == "permission_denied"
    kinds = [e.kind for e in rt.trace.events(run)]
    assert "authorized" in kinds and "validated" not in kinds


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_pending_action_blocks_its_twin_under_any_node_id(store: str, tmp_path: Path) -> None:
    url = "memory://" if store == "memory" else f"sqlite:///{tmp_path / 'a.db'}"
    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="external", idempotency="none")
    def post(text: str) -> str:
        """Post to a board that loses its answers."""
        sent.append(text)
        raise TimeoutError("no answer")

    call = ToolCall(name="post", arguments={"text": "hello"})
    first = rt.call(call, run_id="r", node_id="a")
    twin = rt.call(call, run_id="r", node_id="b")
    assert first.error is not None and twin.error is not None
    assert twin.error.category == "unknown_commit"
    assert twin.error.details["idempotency_key"] == first.error.details["idempotency_key"]
    assert rt.ledger.get_node("r", "b") is None  # the twin was never written, let alone sent
    held = [e.data for e in rt.trace.events("r") if e.kind == "ledger" and e.data.get("sent") is False]
    assert held and held[0]["pending"] == first.error.details["idempotency_key"]
    other = rt.call(ToolCall(name="post", arguments={"text": "bye"}), run_id="r", node_id="c")
    assert sent == ["hello", "bye"] and other.error is not None  # other arguments: another action
    rt.resolve(first.error.details["idempotency_key"], outcome="failed", by="ops", reason="not delivered")
    rt.call(call, run_id="r", node_id="b")  # settled by a person: the twin may go now
    assert sent == ["hello", "bye", "hello"]
    rt.close()


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_a_run_opened_by_two_processes_at_once_renumbers_its_first_event(pg_schema_url: str) -> None:
    first, second = Runtime(pg_schema_url), Runtime(pg_schema_url)
    first.new_run("r")  # stores run_started as event 0
    real = second.trace.next_seq
    stale = iter([0])  # the second read the run's next number before the first wrote

    def next_seq(run_id: str) -> int:
        found = next(stale, None)
        return real(run_id) if found is None else found

    second.trace.next_seq = next_seq  # type: ignore[method-assign]
    opened = threading.Thread(target=second.new_run, args=("r",), daemon=True)
    opened.start()
    opened.join(timeout=10)
    assert not opened.is_alive(), "opening the run deadlocked"
    events = first.trace.events("r")
    assert [e.kind for e in events] == ["run_started", "run_started"] and [e.seq for e in events] == [0, 1]
    first.close()
    second.close()


def test_an_async_read_on_sqlite_stays_on_the_loop_thread_unless_the_run_state_must_be_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SQLite trace store defers its appends, so writing a call's events cannot block the loop:
    no worker thread for them. Saving a changed run state still may block, and leaves the loop."""
    rt = Runtime(f"sqlite:///{tmp_path / 'a.db'}")

    @rt.tool(effect="none", labels={"confidentiality": "public"})  # the run label never changes
    async def look(q: str) -> str:
        return q.upper()

    @rt.tool(effect="none", labels={"confidentiality": "secret"})
    async def vault(q: str) -> str:
        return "s3cret"

    hops: list[str] = []
    real = asyncio.to_thread

    async def counting(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    async def main(run: str) -> list[Any]:
        await rt.acall(ToolCall(name="look", arguments={"q": "warm"}), run_id=run)  # the run opens
        monkeypatch.setattr(asyncio, "to_thread", counting)
        calls = [ToolCall(name="look", arguments={"q": f"x{i}"}) for i in range(5)]
        plain = [await rt.acall(call, run_id=run) for call in calls]
        assert hops == []  # five calls, their events written without leaving the loop's thread
        secret = await rt.acall(ToolCall(name="vault", arguments={"q": "k"}), run_id=run)
        assert hops  # the run's label changed: its state is saved off the loop, then the events
        return [*plain, secret]

    run = rt.new_run()
    out = asyncio.run(main(run))
    assert [o.data for o in out] == ["X0", "X1", "X2", "X3", "X4", "s3cret"]
    looked = [e for e in rt.trace.events(run) if e.kind == "observation"]
    assert len(looked) == 7  # every call's events are in the store when read
    rt.close()
