"""A snapshot of a run's state saved without waiting (``save_later``) that reaches the store after
another process saved a newer one never replaces it: the newer label and turn stay, and the call
ids the late snapshot carried are joined in. The newer snapshot is saved by a real second process
on the same SQLite file or PostgreSQL database; both stores are checked.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actionspace.discovery.runs import join_call_ids
from actionspace.ledger.run_state import PostgresRunStateStore, SqliteRunStateStore
from actionspace.policy.flow import FlowState
from tests.proc import run_child
from tests.proc import url as url  # the fixture

PUBLIC = {"confidentiality": "public", "integrity": "trusted", "readers": None}
INTERNAL = {"confidentiality": "internal", "integrity": "trusted", "readers": None}
SECRET = {"confidentiality": "secret", "integrity": "trusted", "readers": None}


def _snapshot(turn: int, rev: int, context: dict[str, Any], groups: list[Any]) -> dict[str, Any]:
    flow = {"context": context, "user_label": PUBLIC, "user_count": 0, "groups": groups, "artifacts": []}
    return {"v": 1, "principal": {"id": "ana"}, "turn": turn, "pins": {}, "flow": flow, "rev": rev}


OLDER = _snapshot(1, 1, INTERNAL, [[INTERNAL, ["r:n1"]]])
NEWER = _snapshot(2, 2, SECRET, [[INTERNAL, ["r:n1"]], [SECRET, ["r:n2"]]])
LATE = _snapshot(1, 1, INTERNAL, [[INTERNAL, ["r:n1", "r:n3"]]])
"""The older snapshot again, with one more call id behind its label: what ``save_later`` writes."""

_NEWER_SAVER = textwrap.dedent(
    """
    import json, sys
    from actionspace.discovery.runs import join_call_ids
    from actionspace.ledger.run_state import open_run_states

    store = open_run_states(sys.argv[1])
    saved = store.save("r", json.loads(sys.argv[2]), join=join_call_ids)
    store.close()
    print(json.dumps({"saved": saved}))
    """
)


def _open(url: str) -> SqliteRunStateStore | PostgresRunStateStore:
    if url.startswith("sqlite:///"):
        return SqliteRunStateStore(url.removeprefix("sqlite:///"))
    return PostgresRunStateStore(url)


def _call_ids(state: Any) -> set[str]:
    return {call for call, _ in FlowState.from_state(state["flow"]).origins()}


@pytest.mark.parametrize("joined", [True, False], ids=["joined", "plain"])
def test_a_late_snapshot_never_replaces_the_newer_one_another_process_saved(url: str, joined: bool) -> None:
    store = _open(url)
    try:
        assert store.save("r", OLDER) is not False
        assert run_child(_NEWER_SAVER, url, json.dumps(NEWER)) == {"saved": True}
        if joined:
            store.save_later("r", LATE, join=join_call_ids)
        else:
            store.save_later("r", LATE)
        stored = store.load("r")
    finally:
        store.close()
    assert stored is not None
    assert (stored["rev"], stored["turn"], stored["flow"]["context"]) == (2, 2, SECRET)
    assert _call_ids(stored) == ({"r:n1", "r:n2", "r:n3"} if joined else {"r:n1", "r:n2"})


def test_a_late_snapshot_still_deferred_when_another_process_saves_is_joined_to_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    store = _open(url)
    try:
        assert store.save("r", OLDER)
        store.save_later("r", LATE, join=join_call_ids)  # in the writer's queue, or committed already
        assert run_child(_NEWER_SAVER, url, json.dumps(NEWER)) == {"saved": True}
        stored = store.load("r")
    finally:
        store.close()
    assert stored is not None
    assert (stored["rev"], stored["turn"], stored["flow"]["context"]) == (2, 2, SECRET)
    assert _call_ids(stored) == {"r:n1", "r:n2", "r:n3"}
