"""Recovery against status queries that answer late, never, or with garbage, and against another
recovery that settled the same entry meanwhile: nothing is ever made sendable twice."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.ledger.entries import LedgerStore
from actionspace.ledger.recover import recover, recover_key
from actionspace.ledger.status import Committed, NotCommitted, StatusAnswer
from tests.ledger.factories import entry

Status = Callable[..., StatusAnswer]


def _catalog(status: Status, *, timeout_s: float = 30.0) -> Catalog:
    def pay(**_: Any) -> None:
        raise AssertionError("recovery never sends")

    spec = ToolSpec(
        name="pay",
        version="1",
        input_schema={"type": "object"},
        fn=pay,
        effect="write",
        idempotency="query",
        status_query=status,
        timeout_s=timeout_s,
    )
    catalog = Catalog()
    catalog.register(spec)
    return catalog


def _no_events(run: str, kind: str, data: Any) -> None:
    pass


@pytest.mark.parametrize("settle", ["recover", "recover_key"])
def test_a_stale_status_answer_never_undoes_a_send_made_after_another_recovery(
    ledger_store: LedgerStore, settle: str
) -> None:
    crashed = entry(state="dispatched", attempts=1)
    ledger_store.begin(crashed)

    def status(*, key: str, arguments: Any) -> StatusAnswer:
        # While this query runs, another process recovers the entry and the node is sent again.
        stored = ledger_store.get(key)
        assert stored is not None
        accepted = ledger_store.transition(key, ["dispatched"], stored.evolve(state="accepted"))
        assert accepted is not None
        ledger_store.transition(key, ["accepted"], accepted.evolve(state="dispatched", attempts=2))
        return NotCommitted()  # true when it was asked, before the second send

    catalog = _catalog(status)
    if settle == "recover":
        report = recover(ledger_store, catalog, _no_events)
        assert report.redispatchable == [] and report.skipped == [crashed.key]
    else:
        recover_key(ledger_store, catalog, _no_events, crashed.key)
    after = ledger_store.get(crashed.key)
    assert after is not None
    assert (after.state, after.attempts) == ("dispatched", 2)  # the second send is still in flight


def test_a_status_query_that_never_answers_ends_in_unknown_commit_within_the_tool_timeout(
    ledger_store: LedgerStore,
) -> None:
    crashed = entry(state="dispatched", attempts=1)
    ledger_store.begin(crashed)
    release = threading.Event()

    def status(*, key: str, arguments: Any) -> StatusAnswer:
        release.wait(60)
        return NotCommitted()

    reports: list[Any] = []
    worker = threading.Thread(
        target=lambda: reports.append(recover(ledger_store, _catalog(status, timeout_s=0.2), _no_events)),
        daemon=True,
    )
    began = time.monotonic()
    worker.start()
    worker.join(10)
    try:
        assert not worker.is_alive(), "recover hung on a status query that never answers"
        assert time.monotonic() - began < 10
        assert reports[0].unknown_commit == [crashed.key]
        after = ledger_store.get(crashed.key)
        assert after is not None and after.state == "unknown_commit" and after.error is not None
        assert "did not answer" in after.error["details"]["reason"]
    finally:
        release.set()


GARBAGE_REMOTE_IDS: list[Any] = [{"a": 1}, 2**80, b"tx", ["tx"], True, "tx\x00", "tx\ud800", 1.5]


@pytest.mark.parametrize("remote_id", GARBAGE_REMOTE_IDS, ids=repr)
def test_a_garbage_remote_id_from_a_status_query_does_not_stop_recovery(
    ledger_store: LedgerStore, remote_id: Any
) -> None:
    first, second = entry("n1", state="dispatched"), entry("n2", state="dispatched")
    ledger_store.begin(first)
    ledger_store.begin(second)

    def status(*, key: str, arguments: Any) -> StatusAnswer:
        return Committed({"paid": True}, remote_id=remote_id)

    report = recover(ledger_store, _catalog(status), _no_events)
    assert sorted(report.unknown_commit) == sorted([first.key, second.key])
    for key in (first.key, second.key):
        after = ledger_store.get(key)
        assert after is not None and after.state == "unknown_commit" and after.remote_id is None


def test_an_integer_remote_id_is_kept_as_its_text(ledger_store: LedgerStore) -> None:
    crashed = entry(state="dispatched")
    ledger_store.begin(crashed)

    def status(*, key: str, arguments: Any) -> StatusAnswer:
        return Committed({"paid": True}, remote_id=2**62)  # type: ignore[arg-type]

    report = recover(ledger_store, _catalog(status), _no_events)
    assert report.committed == [crashed.key]
    after = ledger_store.get(crashed.key)
    assert after is not None and after.remote_id == str(2**62)


def test_a_status_query_that_raises_system_exit_leaves_the_entry_for_a_person(
    ledger_store: LedgerStore,
) -> None:
    crashed = entry(state="dispatched")
    ledger_store.begin(crashed)

    def status(*, key: str, arguments: Any) -> StatusAnswer:
        raise SystemExit(3)

    report = recover(ledger_store, _catalog(status), _no_events)
    assert report.unknown_commit == [crashed.key]
    after = ledger_store.get(crashed.key)
    assert after is not None and after.error is not None
    assert "SystemExit" in after.error["details"]["reason"]
