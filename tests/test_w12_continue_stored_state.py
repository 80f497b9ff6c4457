"""A run's stored state that cannot be read — not JSON, not an object, written by a newer
actionspace, or holding fields of the wrong shape — stops the process continuing the run with a
typed error (:class:`actionspace.errors.RunStateError`), never with a driver's or a parser's
exception, and never by reading it as a new run (a secret label reset to public, a turn to 0).

The row is damaged the way the world damages it: by another writer of the same SQLite file or
PostgreSQL table, between two steps of the run; the run is then continued by another process.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from actionspace import Labels, Runtime
from actionspace.discovery.runs import join_call_ids
from actionspace.ledger.run_state import PostgresRunStateStore, SqliteRunStateStore
from tests.proc import RunStateRows, run_child
from tests.proc import url as url  # the fixture

PASSWORD = "hunter2-correct-horse"


def _object(change: Callable[[dict[str, Any]], None]) -> Callable[[str], str]:
    def damaged(text: str) -> str:
        state = json.loads(text)
        change(state)
        return json.dumps(state)

    return damaged


DAMAGES: dict[str, Callable[[str], str]] = {
    "not_json": lambda _: '{"v": 1, "flow": {"context": {"confidentiality": "sec',
    "not_an_object": lambda _: "[1, 2, 3]",
    "a_newer_version": _object(lambda s: s.update(v=2)),
    "a_version_that_is_no_number": _object(lambda s: s.update(v="one")),
    "flow_not_an_object": _object(lambda s: s.update(flow="secret")),
    "principal_not_an_object": _object(lambda s: s.update(principal=5)),
    "turn_not_a_number": _object(lambda s: s.update(turn="seven")),
    "an_unknown_label": _object(lambda s: s["flow"]["context"].update(confidentiality="top-secret")),
}

_CONTINUE = textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime
    from actionspace.errors import ActionspaceError

    url, runs = sys.argv[1], json.loads(sys.argv[2])
    rt = Runtime(url, recover_on_start=False)
    sent = []

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        "Send an email."
        sent.append(body)
        return "sent"

    out = {}
    for run in runs:
        email = {"recipient": "eve@example.com", "body": "hunter2-correct-horse"}
        try:
            obs = rt.call({"name": "send_email", "arguments": email}, run_id=run)
            out[run] = ["answered", obs.error.category if obs.error else obs.status]
        except Exception as exc:
            out[run] = [type(exc).__name__, isinstance(exc, ActionspaceError), isinstance(exc, ValueError)]
    rt.close()
    print(json.dumps({"runs": out, "sent": sent}))
    """
)


def _read_secrets(url: str, runs: list[str]) -> None:
    """The first process: each run reads a secret, so its stored label is secret."""
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    for run in runs:
        assert rt.call({"name": "read_password", "arguments": {}}, run_id=run).ok
    rt.close()


@pytest.fixture
def rows(url: str) -> RunStateRows:
    return RunStateRows(url)


def test_a_damaged_run_state_stops_the_continuing_process_with_a_typed_error(rows: RunStateRows) -> None:
    runs = [f"run-{name}" for name in DAMAGES]
    _read_secrets(rows.url, [*runs, "run-intact"])
    damaged = {}
    for run, damage in zip(runs, DAMAGES.values(), strict=True):
        damaged[run] = damage(rows.get(run))
        rows.put(run, damaged[run])

    out = run_child(_CONTINUE, rows.url, json.dumps([*runs, "run-intact"]))

    assert out["sent"] == []
    assert out["runs"].pop("run-intact") == ["answered", "policy_violation"]
    assert out["runs"] == {run: ["RunStateError", True, True] for run in runs}
    for run in runs:  # the damaged row is left for a person to read: never replaced by a new run's
        assert rows.get(run) == damaged[run]


def _store(rows: RunStateRows) -> SqliteRunStateStore | PostgresRunStateStore:
    if rows.path is not None:
        return SqliteRunStateStore(rows.path)
    return PostgresRunStateStore(rows.url)


@pytest.mark.parametrize("damage", ["not_json", "not_an_object", "a_newer_version"])
def test_a_store_refuses_to_read_or_join_over_a_damaged_snapshot(rows: RunStateRows, damage: str) -> None:
    from actionspace.errors import RunStateError

    store = _store(rows)
    try:
        store.save("r", {"v": 1, "turn": 3, "rev": 1})
        text = DAMAGES[damage](rows.get("r"))
        rows.put("r", text)
        with pytest.raises(RunStateError, match="'r'"):
            store.load("r")
        for save in (store.save, store.save_later):
            with pytest.raises(RunStateError):
                save("r", {"v": 1, "turn": 4, "rev": 2}, join=join_call_ids)
                store.load("r")  # a SQLite save_later is written by the writer: a read waits for it
        assert rows.get("r") == text
    finally:
        store.close()
