"""Two processes of this version that make one new run at once, through sessions, never name two
calls alike.

A call the model gave no id (raw Hermes text writes none) is named ``<run>:n<k>`` by the runtime,
``k`` a node number of the run. The process that makes a run hands out the first block of numbers
without asking the store; every other process reserves blocks past it in the store. When two
processes open a run no one has made yet at the same moment, both find nothing stored and both
try to make it: only the one whose first save lands may take the first block, or both would name
calls ``<run>:n1``… and the trace, a denial's details, an approval and each session's answer would
point at the other process's call. Each child here is a real process on the same store, released
together; the ids are compared as the sessions answered them and as the trace stored them.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

from actionspace import Runtime
from tests.proc import WAIT_FOR, at_once
from tests.proc import url as url  # the fixture

MESSAGES = 12
"""Messages each child's model sends: one call, then two, alternately (each without ids)."""

_MAKER = textwrap.dedent(
    """
    import json, os, sys
    from actionspace import Runtime
    {wait_for}
    url, run, go, messages = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def look(x: int) -> int:
        "Look x up."
        return x

    def hermes(*xs):
        calls = ({{"name": "look", "arguments": {{"x": x}}}} for x in xs)
        return "".join("<tool_call>" + json.dumps(c) + "</tool_call>" for c in calls)

    print("ready", flush=True)
    wait_for(go)
    s = rt.session(run_id=run, provider="openai_chat")  # the run is made here, or in the other child
    ids = []
    for m in range(messages):
        xs = (m,) if m % 2 == 0 else (m, -m)
        turn = s.handle(hermes(*xs))
        assert [o.data for o in turn.observations] == list(xs), turn.observations
        ids += [o.call_id for o in turn.observations]
    rt.close()
    print(json.dumps({{"ids": ids, "pid": os.getpid()}}))
    """
).format(wait_for=WAIT_FOR)


def _observed(url: str, run: str) -> Counter[str]:
    """How often each call id is observed in the run's stored trace (one observation a call)."""
    rt = Runtime(url, recover_on_start=False)
    try:
        return Counter(e.call_id for e in rt.trace.events(run) if e.kind == "observation" and e.call_id)
    finally:
        rt.close()


def test_two_processes_making_one_run_at_once_never_mint_one_call_id_twice(url: str, tmp_path: Path) -> None:
    calls = MESSAGES + MESSAGES // 2
    for attempt in range(3):  # each a new run, made by both at once
        run, go = f"conv-{attempt}", tmp_path / f"go-{attempt}"
        first, second = at_once(_MAKER, [[url, run, str(go), str(MESSAGES)]] * 2, go)
        ids = first["ids"] + second["ids"]
        assert all(i.startswith(f"{run}:n") for i in ids), ids
        clashes = sorted(set(first["ids"]) & set(second["ids"]))
        assert not clashes, f"minted in both processes: {clashes}"
        assert len(first["ids"]) == len(second["ids"]) == calls and len(set(ids)) == 2 * calls
        stored = _observed(url, run)
        assert {i: stored[i] for i in ids if stored[i] != 1} == {}, "a minted id observed other than once"
