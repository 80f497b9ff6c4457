"""A process killed (SIGKILL) between a write's intent and its outcome, and the same write proposed
again by another process at once: when no other process of the store lives, the holder is certainly
dead and the proposal settles the entry as recovery would, without waiting out ``MAX_WAIT_S`` (30 s)
or the tool's holder window: the status query's "committed" is replayed, "not committed" is sent
once, a tool that cannot be asked is ``unknown_commit``. With a third process alive beside them,
which of the two holds the entry is not known: the wait stands. The killed process's mark file
(SQLite) is removed by the look that finds it. SQLite file and PostgreSQL schema alike.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from actionspace.ledger import commit
from tests.proc import BESIDE, Child, sent
from tests.proc import url as url  # the fixture
from tests.test_w18_proc_killed_between_intent_and_outcome import _killed, _proposed_here


def _marks(url: str) -> list[str]:
    """The mark files beside a SQLite store's database (none for PostgreSQL)."""
    if not url.startswith("sqlite:///"):
        return []
    folder = Path(url.removeprefix("sqlite:///") + "-live")
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize(
    ("die", "idempotency", "answer", "sends", "state"),
    [
        ("after", "query", ("ok", None), 1, "committed"),  # the service has it: replayed, not sent
        ("before", "query", ("ok", None), 1, "committed"),  # the service never got it: sent, once
        ("after", "none", ("error", "unknown_commit"), 1, "unknown_commit"),  # for a person
        ("before", "none", ("error", "unknown_commit"), 0, "unknown_commit"),
    ],
)
def test_a_re_proposal_beside_a_killed_send_with_no_other_process_alive_settles_it_at_once(
    url: str,
    tmp_path: Path,
    die: str,
    idempotency: str,
    answer: tuple[str, str | None],
    sends: int,
    state: str,
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    _killed(url, outbox, die, idempotency)
    began = time.monotonic()
    obs, states = _proposed_here(url, outbox, idempotency)
    took = time.monotonic() - began
    assert (obs.status, obs.error.category if obs.error else None) == answer, obs
    assert states == [state]  # settled in the store: the next proposal replays it
    assert len(sent(outbox)) == sends
    assert took < commit.MAX_WAIT_S, took  # not the wait for a holder that may live (old: 30 s)
    again, states = _proposed_here(url, outbox, idempotency)
    assert (again.status, again.error.category if again.error else None) == answer, again
    assert states == [state]
    assert len(sent(outbox)) == sends


@pytest.mark.parametrize("die", ["before", "after"])
def test_with_a_third_process_alive_the_wait_for_the_holder_stands(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, die: str
) -> None:
    """No false "dead": the live process beside may be the holder, as far as anyone can tell."""
    outbox = tmp_path / "outbox.jsonl"
    release = tmp_path / "release"
    with Child(BESIDE, url, str(release)) as beside:
        beside.expect("ready")
        _killed(url, outbox, die, "query")
        monkeypatch.setattr(commit, "MAX_WAIT_S", 1.0)  # the wait is cut short: its answer matters
        monkeypatch.setattr("actionspace.ledger.liveness.PG_SETTLED_S", 0.0)  # looks at once here too
        obs, states = _proposed_here(url, outbox, "query")
        release.touch()
        beside.finish()
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert obs.error.details.get("idempotency_key"), obs.error
    assert states == ["dispatched"]  # left to its holder, or to a proposal once none can be alive
    assert len(sent(outbox)) == (1 if die == "after" else 0)


def test_a_killed_process_mark_file_is_removed_by_the_look_that_finds_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    outbox = tmp_path / "outbox.jsonl"
    _killed(url, outbox, "before", "none")
    left = _marks(url)
    assert len(left) == 1 and left[0].endswith(".lock"), left  # the killed process's, still there
    from actionspace.ledger.liveness import others_alive

    seen: list[list[str]] = []

    def look(store: Any) -> bool:
        alive = others_alive(store)
        seen.append(_marks(url))
        return alive

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("actionspace.ledger.liveness.others_alive", look)
        obs, _ = _proposed_here(url, outbox, "none")
    assert obs.error is not None and obs.error.category == "unknown_commit", obs
    assert seen and all(left[0] not in marks and len(marks) == 1 for marks in seen), (left, seen)
    assert _marks(url) == []  # and the proposing process's own went with its close
