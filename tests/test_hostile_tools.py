"""What a tool hands back can be as hostile as what a model proposes: a result no encoder can
write (its ``__repr__`` raises, its mapping's ``items()`` raises, a dataclass holding a lock), an
exception whose message raises, an artifact store that fails while a large result is kept, a
dispatch that breaks. Each ends typed, and a write's ledger entry settles: the effect happened
once and a new proposal of it replays, or its outcome is honestly ``unknown_commit``.

Before, any of these after a write's dispatch left its entry ``dispatched`` in this process: the
model read ``internal``, and every new proposal of the same action read ``transient: another
caller is executing this action``, with ``retry_same_key``, for as long as the process lived.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Effect, Runtime, ToolError, ToolResult
from actionspace.session import Session
from tests.pg import STORES, store_url


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from store_url(request, tmp_path)


class Unprintable:
    """An object whose ``repr`` and ``str`` raise (a half-built ORM row, a closed handle's proxy)."""

    def __repr__(self) -> str:
        raise RuntimeError("repr of a detached row")

    __str__ = __repr__


class BadMapping(Mapping[str, Any]):
    """A mapping whose reads raise."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("the cursor is closed")

    def __len__(self) -> int:
        return 1


@dataclasses.dataclass
class WithLock:
    """``dataclasses.asdict`` deep-copies its fields, and a lock cannot be copied."""

    name: str
    lock: Any = dataclasses.field(default_factory=threading.Lock)


class Unsayable(Exception):
    """An exception whose message raises when read."""

    def __str__(self) -> str:
        raise RuntimeError("the message of an exception of a closed connection")


class UnsayableTimeout(TimeoutError):
    """A timeout (a write may have landed behind it) whose message raises."""

    def __str__(self) -> str:
        raise RuntimeError("no message")


def _entry(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _message(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(entries)}


def _pay_runtime(url: str, result: Any, sent: list[int]) -> Runtime:
    rt = Runtime(url)

    @rt.tool(effect="write")
    def pay(amount: int) -> Any:
        """Pay an amount."""
        sent.append(amount)
        if isinstance(result, BaseException):
            raise result
        return result

    return rt


def _ledger_state(rt: Runtime, key: str) -> str:
    entry = rt.engine.ledger.get(key)
    assert entry is not None
    return entry.state


@pytest.mark.parametrize(
    "result",
    [Unprintable(), [1, Unprintable()], {"row": Unprintable()}, BadMapping(), WithLock("a")],
    ids=["unprintable", "in-a-list", "in-a-dict", "bad-mapping", "dataclass-with-lock"],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_whose_result_cannot_be_written_commits_once_and_replays(
    url: str, result: Any, mode: str
) -> None:
    sent: list[int] = []
    with _pay_runtime(url, result, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        first = _handle(s, mode, _message(_entry("a", "pay", '{"amount": 5}')))
        assert first.status == "ok", first.error
        if isinstance(result, WithLock):  # read field by field: nothing to copy, nothing lost
            assert first.data["name"] == "a"
        else:
            assert "cannot be shown" in str(first.data)
        key = first.diagnostics["idempotency_key"]
        assert _ledger_state(rt, key) == "committed"
        again = _handle(s, mode, _message(_entry("b", "pay", '{"amount": 5}')))
        assert again.status == "ok", again.error
        assert again.diagnostics.get("replayed") is True
        assert again.data == first.data
        assert sent == [5]


def test_the_part_that_cannot_be_written_is_replaced_and_the_rest_kept() -> None:
    with _pay_runtime("memory://", {"id": 7, "row": Unprintable(), "tags": ["a", Unprintable()]}, []) as rt:
        obs = rt.call(_entry("a", "pay", '{"amount": 1}'))
        assert obs.status == "ok", obs.error
        assert obs.data["id"] == 7
        assert obs.data["tags"][0] == "a"
        assert obs.data["row"] == obs.data["tags"][1]
        assert obs.data["row"].startswith("<Unprintable")


@pytest.mark.parametrize(
    ("raised", "category", "state"),
    [(Unsayable(), "unclassified", "failed"), (UnsayableTimeout(), "unknown_commit", "unknown_commit")],
    ids=["unsayable", "unsayable-timeout"],
)
def test_an_exception_whose_message_raises_keeps_its_category(
    url: str, raised: BaseException, category: str, state: str
) -> None:
    sent: list[int] = []
    with _pay_runtime(url, raised, sent) as rt:
        s = rt.session()
        s.user("pay 5")
        first = s.handle(_message(_entry("a", "pay", '{"amount": 5}'))).observations[0]
        assert first.error is not None
        assert first.error.category == category
        if category == "unclassified":  # the class named, its message's failure said
            assert first.error.vendor_code == type(raised).__name__
            assert "its text cannot be read" in first.error.message
        (key,) = {e.data["key"] for e in rt.engine.trace.events(s.run_id) if e.kind == "ledger"}
        assert _ledger_state(rt, key) == state
        again = s.handle(_message(_entry("b", "pay", '{"amount": 5}'))).observations[0]
        assert again.error is not None
        assert again.error.category != "transient", again.error.message
        assert len(sent) <= 2 if category == "unclassified" else sent == [5]


class _FullDisk:
    def put(self, raw: bytes) -> str:
        raise OSError(28, "No space left on device")


def test_a_large_result_whose_artifact_cannot_be_kept_commits_and_says_so(tmp_path: Path) -> None:
    sent: list[int] = []
    with _pay_runtime(f"sqlite:///{tmp_path / 'a.db'}", {"receipt": "x" * 100_000}, sent) as rt:
        rt.engine.artifacts.put = _FullDisk().put  # type: ignore[method-assign,assignment]
        s = rt.session()
        s.user("pay")
        first = s.handle(_message(_entry("a", "pay", '{"amount": 5}'))).observations[0]
        assert first.status == "ok", first.error
        # what fits is shown, marked cut, with no artifact to read the rest from
        assert first.complete is False and first.trimming is not None and first.artifact_ref is None
        assert "xxxx" in str(first.data)
        assert _ledger_state(rt, first.diagnostics["idempotency_key"]) == "committed"
        again = s.handle(_message(_entry("b", "pay", '{"amount": 5}'))).observations[0]
        assert again.diagnostics.get("replayed") is True
        assert sent == [5]


def _handle(s: Session, mode: str, message: dict[str, Any]) -> Any:
    if mode == "sync":
        return s.handle(message).observations[0]
    return asyncio.run(s.ahandle(message)).observations[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_dispatch_that_breaks_is_unknown_commit_and_never_sent_again(tmp_path: Path, mode: str) -> None:
    sent: list[int] = []
    with _pay_runtime(f"sqlite:///{tmp_path / 'a.db'}", "paid", sent) as rt:
        executor = rt.engine.executor
        real, areal = executor.run, executor.arun

        def broken(*args: Any, **kwargs: Any) -> Any:
            real(*args, **kwargs)  # the tool runs; what carries its answer back breaks
            raise RuntimeError("lost on the way back")

        async def abroken(*args: Any, **kwargs: Any) -> Any:
            await areal(*args, **kwargs)
            raise RuntimeError("lost on the way back")

        executor.run, executor.arun = broken, abroken  # type: ignore[method-assign]
        s = rt.session()
        s.user("pay")
        first = _handle(s, mode, _message(_entry("a", "pay", '{"amount": 5}')))
        assert first.error is not None and first.error.category == "unknown_commit", first.error
        again = _handle(s, mode, _message(_entry("b", "pay", '{"amount": 5}')))
        assert again.error is not None and again.error.category == "unknown_commit", again.error
        assert sent == [5]


def _hostile_leaves() -> st.SearchStrategy[Any]:
    makers: dict[str, Callable[[], Any]] = {
        "unprintable": Unprintable,
        "bad-mapping": BadMapping,
        "dataclass-with-lock": lambda: WithLock("x"),
        "bytes": lambda: b"\xff\xfe",
        "nan": lambda: float("nan"),
        "wide-int": lambda: 2**70,
        "mixed-set": lambda: {1, "a"},
        "none": lambda: None,
    }
    return st.sampled_from(sorted(makers)).map(lambda name: makers[name]())


def _hostile_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        _hostile_leaves() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=4)
            | st.tuples(inner, inner)
        ),
        max_leaves=12,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_hostile_values())
def test_any_result_a_write_returns_is_committed_once_and_replayed(tmp_path: Path, value: Any) -> None:
    sent: list[int] = []
    with _pay_runtime("memory://", value, sent) as rt:
        s: Session = rt.session()
        s.user("pay")
        first = s.handle(_message(_entry("a", "pay", '{"amount": 5}'))).observations[0]
        assert first.status == "ok", first.error
        assert _ledger_state(rt, first.diagnostics["idempotency_key"]) == "committed"
        again = s.handle(_message(_entry("b", "pay", '{"amount": 5}'))).observations[0]
        assert again.diagnostics.get("replayed") is True
        assert again.data == first.data
        assert sent == [5]


def test_a_post_condition_whose_exception_cannot_be_read_is_named_and_the_write_replays() -> None:
    sent: list[int] = []
    rt = Runtime("memory://")

    def raises(obs: Any) -> Any:
        raise Unsayable()

    @rt.tool(effect="write", verify=[raises])
    def pay(amount: int) -> int:
        """Pay an amount."""
        sent.append(amount)
        return amount

    with rt:
        s = rt.session()
        s.user("pay")
        first = _handle(s, "sync", _message(_entry("a", "pay", '{"amount": 5}')))
        assert first.error is not None
        assert "the post-condition raises raised Unsayable" in first.error.message
        again = _handle(s, "sync", _message(_entry("b", "pay", '{"amount": 5}')))
        assert again.diagnostics.get("replayed") is True
        assert sent == [5]


@settings(max_examples=40, deadline=None)
@given(value=_hostile_values())
def test_any_result_is_an_ok_observation_on_every_path(value: Any) -> None:
    """The precompiled path (``acall`` of a tool without side effects), the stages (``call``) and
    a plan node shape the same hostile result, and agree on it."""
    with Runtime("memory://") as rt:

        @rt.tool(effect="none")
        def give(n: int) -> Any:
            """Return the value."""
            return value

        call = _entry("a", "give", '{"n": 1}')
        fast = asyncio.run(rt.acall(call))
        staged = rt.call(call)
        planned = rt.run_plan({"nodes": [{"id": "g", "tool": "give", "arguments": {"n": 1}}]}).nodes["g"]
        for obs in (fast, staged, planned):
            assert obs.status == "ok", obs.error
        assert fast.data == staged.data == planned.data
        assert fast.content_hash == staged.content_hash == planned.content_hash


def test_a_tool_result_of_other_types_is_committed_with_its_facts_as_text(url: str) -> None:
    """``ToolResult`` declares text for versions and ids; a tool returns what it has: a database
    version number, a list of ids. Before, on SQLite and PostgreSQL such a write failed as
    ``internal`` after its effect and left its entry ``dispatched``."""
    result = ToolResult(
        data={"ok": True},
        resource_version=5,  # type: ignore[arg-type]
        remote_id=[1, 2],  # type: ignore[arg-type]
        sort_key=Unprintable(),  # type: ignore[arg-type]
        total="many",  # type: ignore[arg-type]
        effects=["garbage", {"resource_id": 7, "kind": "created"}],  # type: ignore[arg-type]
    )
    sent: list[int] = []
    with _pay_runtime(url, result, sent) as rt:
        s = rt.session()
        s.user("pay")
        first = _handle(s, "sync", _message(_entry("a", "pay", '{"amount": 5}')))
        assert first.status == "ok", first.error
        assert first.provenance.resource_version == "5"
        assert first.diagnostics["remote_id"] == "[1, 2]"
        assert first.diagnostics["sort_key"].startswith("<Unprintable: its text cannot be read")
        assert first.total is None
        assert first.effects == (Effect(resource_id="7", kind="created"),)
        assert _ledger_state(rt, first.diagnostics["idempotency_key"]) == "committed"
        again = _handle(s, "sync", _message(_entry("b", "pay", '{"amount": 5}')))
        assert again.diagnostics.get("replayed") is True
        assert again.effects == first.effects
        assert sent == [5]


@pytest.mark.parametrize(
    ("raised", "category"),
    [
        (lambda: ToolError("permanent", "bad", details={"row": object(), 3: Unprintable()}), "permanent"),
        (lambda: ToolError("permanent", 12345), "permanent"),  # type: ignore[arg-type]
        (lambda: ToolError("rate_limited", "slow", retry_after="soon"), "rate_limited"),
        (lambda: ToolError("conflict", "taken", resource_ids=[object()]), "conflict"),
        (lambda: ToolError("unknown_commit", "?", details={"sent": {1, 2}}), "unknown_commit"),
    ],
    ids=["details", "message", "retry-after", "resource-ids", "unknown-commit-details"],
)
def test_a_tool_error_with_fields_of_other_types_keeps_its_category_and_settles(
    url: str, raised: Callable[[], ToolError], category: str
) -> None:
    """A ``ToolError``'s fields are the tool's: before, details or ids no store can write failed the
    write as ``internal`` on SQLite and PostgreSQL, its entry left ``dispatched``; a message that
    is not text, or a ``retry_after`` that is not seconds, failed any call as ``internal``."""
    sent: list[int] = []
    rt = Runtime(url)

    @rt.tool(effect="write")
    def pay(amount: int) -> int:
        """Pay an amount."""
        sent.append(amount)
        raise raised()

    with rt:
        s = rt.session()
        s.user("pay")
        first = _handle(s, "sync", _message(_entry("a", "pay", '{"amount": 5}')))
        assert first.error is not None and first.error.category == category, first.error
        json.dumps(first.error.to_dict())  # plain JSON, as every store writes it
        (key,) = {e.data["key"] for e in rt.engine.trace.events(s.run_id) if e.kind == "ledger"}
        assert _ledger_state(rt, key) in ("failed", "unknown_commit")
        again = _handle(s, "sync", _message(_entry("b", "pay", '{"amount": 5}')))
        assert again.error is not None and again.error.category != "transient", again.error


def test_an_event_holding_what_no_encoder_writes_is_kept_with_a_placeholder(url: str) -> None:
    """``rt.record`` of a verifier's finding (any value) on a store that writes JSON: before, a
    value whose ``repr`` raised lost the whole batch of events it was written with."""
    if url == "memory://":
        pytest.skip("a memory store keeps the values themselves")
    with Runtime(url) as rt:
        run = rt.new_run()
        rt.record(run, "verified", {"row": Unprintable(), Unprintable(): 1, "ok": True})  # type: ignore[dict-item]
        rt.finish(run, why=BadMapping())
    with Runtime(url) as again:
        events = again.engine.trace.events(run)
    kinds = [e.kind for e in events]
    assert kinds == ["run_started", "verified", "run_finished"]
    verified = events[1].data
    assert verified["ok"] is True
    # named by its type: an object's own repr is never run for the trace (it may raise, hang or be huge)
    assert verified["row"] == "<tests.test_hostile_tools.Unprintable object>"
