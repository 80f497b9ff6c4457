"""Call ids the runtime mints (``<run>:n<k>``, for a call the model gave no id) are unique in the
run across processes: two live processes on one run (two workers on one SQLite file or one
PostgreSQL database) and a process continuing the run after another one ended or was killed.

A minted id names the call in the trace (replay, ``trace show``), in a denial's details, in an
approval and in the session's answer to the model: two calls under one id make each of those point
at the wrong call. Each child here is a real process on the same store; the ids are compared as the
children saw them and as the trace stored them.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from pathlib import Path

from actionspace import Runtime
from tests.proc import WAIT_FOR, at_once, run_child, run_killed
from tests.proc import url as url  # the fixture

CALLS = 40
"""Calls each child makes without an id: far more than the events two runs' openings apart."""

_WORKER = textwrap.dedent(
    """
    import json, os, sys
    from actionspace import Runtime, ToolCall
    {wait_for}
    url, run, go, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def look(x: int) -> int:
        "Look x up."
        return x

    # The run is open in both processes (an id and a node given: nothing minted) before either
    # mints an id.
    warm = ToolCall(name="look", arguments={{"x": -1}}, id=f"warm-{{os.getpid()}}")
    rt.call(warm, run_id=run, node_id=f"warm-{{os.getpid()}}")
    print("ready", flush=True)
    wait_for(go)
    ids = [rt.call({{"name": "look", "arguments": {{"x": i}}}}, run_id=run).call_id for i in range(calls)]
    rt.close()
    print(json.dumps({{"ids": ids}}))
    """
).format(wait_for=WAIT_FOR)

_CALLS_THEN = textwrap.dedent(
    """
    import json, os, signal, sys
    from actionspace import Runtime

    url, run, calls, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if end == "kill":  # killed before the SQLite writer's flusher commits what it defers (its linger)
        from actionspace.ledger import sqlite_writer

        sqlite_writer.LINGER_S = 3600.0
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def look(x: int) -> int:
        "Look x up."
        return x

    ids = [rt.call({"name": "look", "arguments": {"x": i}}, run_id=run).call_id for i in range(calls)]
    print(json.dumps({"ids": ids}), flush=True)
    if end == "kill":  # gone before anything it held back reached the store
        os.kill(os.getpid(), signal.SIGKILL)
    rt.close()
    """
)


def _trace_ids(url: str, run: str) -> Counter[str]:
    """How often each call id is observed in the run's stored trace (one observation a call)."""
    rt = Runtime(url, recover_on_start=False)
    try:
        return Counter(e.call_id for e in rt.trace.events(run) if e.kind == "observation" and e.call_id)
    finally:
        rt.close()


def test_two_live_processes_on_one_run_never_mint_the_same_call_id(url: str, tmp_path: Path) -> None:
    go = tmp_path / "go"
    first, second = at_once(_WORKER, [[url, "conv", str(go), str(CALLS)]] * 2, go)
    ids = first["ids"] + second["ids"]
    assert all(i.startswith("conv:n") for i in ids), ids
    clashes = sorted(set(first["ids"]) & set(second["ids"]))
    assert not clashes, f"minted in both processes: {clashes}"
    assert len(set(ids)) == 2 * CALLS
    stored = _trace_ids(url, "conv")
    assert {i: stored[i] for i in ids if stored[i] != 1} == {}, "a minted id observed other than once"


def test_a_process_continuing_a_run_mints_no_id_an_ended_one_used(url: str) -> None:
    before = run_child(_CALLS_THEN, url, "conv", "5", "close")["ids"]
    after = run_child(_CALLS_THEN, url, "conv", "5", "close")["ids"]
    assert not set(before) & set(after), (before, after)
    assert len(set(before + after)) == 10


def test_a_process_continuing_a_run_mints_no_id_a_killed_one_answered_with(url: str) -> None:
    """The first process answered its calls under minted ids and was killed before what it held
    back (SQLite's trace appends, committed after a linger) reached the store: the ids it showed
    must not be minted again for other calls."""
    before = json.loads(run_killed(_CALLS_THEN, url, "conv", "5", "kill"))["ids"]
    after = run_child(_CALLS_THEN, url, "conv", "5", "close")["ids"]
    assert not set(before) & set(after), (before, after)
    assert len(set(before + after)) == 10
