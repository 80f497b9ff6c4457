"""A budget spent by several processes at the same instant never goes over its limit.

Four real processes share one SQLite file or PostgreSQL schema, each with a runtime metering the
same budget (3 calls of the run, or of the principal across runs); each is released at once (a file
all wait for) to make two writes of the same run. The payment service counts what it received:
exactly the limit is sent, every other call is ``budget_exceeded`` and sent nothing, and the store's
count of what is left is 0 whichever process reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from actionspace import Budget, Runtime
from tests.proc import WAIT_FOR, at_once, run_killed, sent
from tests.proc import url as url  # the fixture

LIMIT = 3

SPENDING = (
    WAIT_FOR
    + """
import json, os, sys
from actionspace import Budget, Runtime, ToolCall

url, outbox, per, go = sys.argv[1:5]
rt = Runtime(url, recover_on_start=False, budgets=[Budget(calls=3, per=per)])

@rt.tool(effect="external", idempotency="none")
def pay(to: str, cents: int) -> str:
    "Pay someone."
    with open(outbox, "a") as f:
        f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\\n")
    return "paid"

print("ready", flush=True)
wait_for(go)
answers = []
for n in range(2):
    run = "r" if per == "run" else f"r{os.getpid()}"  # per principal: spent across runs
    call = ToolCall(name="pay", arguments={"to": f"{os.getpid()}-{n}", "cents": 100}, id=f"c{n}")
    obs = rt.call(call, run_id=run)
    answers.append(obs.error.category if obs.error else obs.status)
rt.close()
print(json.dumps({"answers": answers}))
"""
)


@pytest.mark.parametrize("per", ["run", "principal"])
def test_four_processes_spending_one_budget_at_once_send_exactly_its_limit(
    url: str, tmp_path: Path, per: Literal["run", "principal"]
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    args = [url, str(outbox), per, str(tmp_path / "go")]
    results = at_once(SPENDING, [args] * 4, tmp_path / "go")
    answers = [a for r in results for a in r["answers"]]
    assert sorted(answers) == ["budget_exceeded"] * (8 - LIMIT) + ["ok"] * LIMIT, answers
    assert len(sent(outbox)) == LIMIT
    rt = Runtime(url, recover_on_start=False, budgets=[Budget(calls=LIMIT, per=per)])
    try:
        left = rt.budget(run_id="r")
        assert left["calls"] == 0, left
    finally:
        rt.close()


KILLED = """
import json, os, signal, sys
from actionspace import Budget, Runtime, ToolCall

url, outbox, die = sys.argv[1:4]
rt = Runtime(url, recover_on_start=False, budgets=[Budget(calls=1, per="run")])

@rt.tool(effect="external", idempotency="none")
def pay(to: str, cents: int) -> str:
    "Pay someone."
    if die == "before":
        print("killed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    with open(outbox, "a") as f:
        f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\\n")
    print("killed", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)

rt.call(ToolCall(name="pay", arguments={"to": "bob", "cents": 100}, id="c1"), run_id="r")
"""


@pytest.mark.parametrize("die", ["before", "after"])
def test_a_call_of_a_process_killed_while_it_ran_stays_charged_in_the_next(
    url: str, tmp_path: Path, die: str
) -> None:
    """The killed process's reservation is reclaimed (its pid is gone) at what the ledger says: the
    call was dispatched, whether the service got it or not, so it stays spent; the budget's one call
    is never handed out again to another process."""
    outbox = tmp_path / "outbox.jsonl"
    assert run_killed(KILLED, url, str(outbox), die) == "killed"
    rt = Runtime(url, recover_on_start=False, budgets=[Budget(calls=1, per="run")])
    paid: list[str] = []

    @rt.tool(effect="external", idempotency="none")
    def pay(to: str, cents: int) -> str:
        """Pay someone."""
        paid.append(to)
        return "paid"

    try:
        other = rt.call({"name": "pay", "arguments": {"to": "cy", "cents": 100}}, run_id="r")
        assert other.error is not None and other.error.category == "budget_exceeded", other
        assert rt.budget(run_id="r")["calls"] == 0
    finally:
        rt.close()
    assert paid == [] and len(sent(outbox)) == (1 if die == "after" else 0)
