"""A process killed (SIGKILL) inside a send, and a new process started on the store at once: when no
other process of the store is alive, its start-up recovery settles the killed send's entry (younger
than the 30 s start-up age and the tool's holder window, which it used to leave for 90 s), as any
recovery does: the status query's "committed" is recorded, "not committed" puts it back to
``accepted`` (the next proposal sends it once), a tool that cannot be asked is ``unknown_commit``.
Recovery itself sends nothing. With a third process alive beside them, that process may be the
holder as far as anyone can tell: the entry is left as before. Two processes starting at the same
instant never both find themselves alone. SQLite file and PostgreSQL schema alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime, ToolCall
from tests.proc import BESIDE, WAIT_FOR, Child, sent
from tests.proc import url as url  # the fixture
from tests.test_w18_proc_killed_between_intent_and_outcome import TOOLS, _killed

_PAY = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c2")


def _started(url: str, outbox: Path, idempotency: str) -> Runtime:
    """A runtime started on ``url`` as a process starts (recovery at its first run), with the killed
    process's tools and a read: its first call (a read, in a run of its own) runs that recovery."""
    rt = Runtime(url)
    scope: dict[str, Any] = {}
    exec(TOOLS, scope)
    scope["add_tools"](rt, str(outbox), "no", idempotency)
    rt.add_tool(
        name="look",
        fn=lambda who: who,
        effect="read",
        description="Look someone up.",
        input_schema={"type": "object", "properties": {"who": {"type": "string"}}},
    )
    assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
    return rt


def _recovered(rt: Runtime) -> list[Mapping[str, Any]]:
    """The ledger moves recovery made, as the trace holds them."""
    return [
        e.data
        for run in ("r", "other")
        for e in rt.trace.events(run)
        if e.kind == "ledger" and e.data.get("by") == "recover"
    ]


@pytest.mark.parametrize(
    ("die", "idempotency", "settled", "answer", "sends"),
    [
        ("after", "query", "committed", ("ok", None), 1),  # the service has it: recorded, replayed
        ("before", "query", "accepted", ("ok", None), 1),  # it never got it: sent once, by the proposal
        ("after", "none", "unknown_commit", ("error", "unknown_commit"), 1),  # for a person
        ("before", "none", "unknown_commit", ("error", "unknown_commit"), 0),
    ],
)
def test_a_process_starting_alone_settles_a_killed_send_at_its_start(
    url: str,
    tmp_path: Path,
    die: str,
    idempotency: str,
    settled: str,
    answer: tuple[str, str | None],
    sends: int,
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    _killed(url, outbox, die, idempotency)
    rt = _started(url, outbox, idempotency)
    try:
        (entry,) = rt.ledger.list()
        assert entry.state == settled, entry  # old: still dispatched, left for the holder window
        assert [(m["from"], m["to"]) for m in _recovered(rt)] == [("dispatched", settled)]
        assert len(sent(outbox)) == (1 if die == "after" else 0)  # recovery sent nothing
        obs = rt.call(_PAY, run_id="r")
        assert (obs.status, obs.error.category if obs.error else None) == answer, obs
        assert len(sent(outbox)) == sends
    finally:
        rt.close()


@pytest.mark.parametrize("die", ["before", "after"])
def test_with_a_third_process_alive_the_start_leaves_the_killed_send(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, die: str
) -> None:
    """No false "dead": the live process beside may be the holder, as far as anyone can tell."""
    outbox, release = tmp_path / "outbox.jsonl", tmp_path / "release"
    monkeypatch.setattr("actionspace.ledger.liveness.PG_SETTLED_S", 0.0)  # it looks at once here too
    with Child(BESIDE, url, str(release)) as beside:
        beside.expect("ready")
        _killed(url, outbox, die, "query")
        rt = _started(url, outbox, "query")
        try:
            assert [e.state for e in rt.ledger.list()] == ["dispatched"]
            assert _recovered(rt) == []
        finally:
            rt.close()
            release.touch()
        beside.finish()
    assert len(sent(outbox)) == (1 if die == "after" else 0)


_TWINS = (
    WAIT_FOR
    + """
import json, sys
from actionspace import Runtime
from actionspace.ledger import liveness
liveness.PG_SETTLED_S = 0.0  # a fresh session's look is trusted at once: the race is the marks'
url, folder, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
print("ready", flush=True)
for n in range(rounds):
    wait_for(f"{folder}/go-{n}")
    rt = Runtime(url, recover_on_start=False)  # its mark taken as any runtime's, then it looks
    print(json.dumps({"round": n, "alone": not liveness.others_alive(rt.ledger)}), flush=True)
    wait_for(f"{folder}/looked-{n}")  # both stay open until both looked
    rt.close()
    print("closed", flush=True)
print("{}", flush=True)
"""
)


def test_two_processes_starting_together_never_both_find_themselves_alone(url: str, tmp_path: Path) -> None:
    rounds = 25
    pair = [Child(_TWINS, url, str(tmp_path), str(rounds)) for _ in range(2)]
    try:
        for child in pair:
            child.expect("ready")
        seen: list[list[bool]] = []
        for n in range(rounds):
            (tmp_path / f"go-{n}").touch()  # both wait on it: they start as together as can be
            looks = [json.loads(child.line()) for child in pair]
            assert [look["round"] for look in looks] == [n, n]
            seen.append([look["alone"] for look in looks])
            (tmp_path / f"looked-{n}").touch()
            for child in pair:
                child.expect("closed")
        for child in pair:
            assert child.result() == {}
    finally:
        for n in range(rounds):
            (tmp_path / f"go-{n}").touch()
            (tmp_path / f"looked-{n}").touch()
        for child in pair:
            child.__exit__()
    assert not any(all(looks) for looks in seen), seen  # at least one saw the other, every time
