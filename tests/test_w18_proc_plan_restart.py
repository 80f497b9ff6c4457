"""A plan whose process is killed (SIGKILL) between two of its steps, run again by the next process
with the same run: the nodes that finished are answered from the ledger, never run again, and the
rest run once.

The plan pays ``a``, then ``b``, then checks the books (a read), then pays ``c``. The first process
is a real child on the same SQLite file or PostgreSQL schema, killed inside the check: both
payments committed, the last not begun. The next process (this one) runs the same plan in the
same run. The payment service counts what it received in a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actionspace import Plan, Runtime
from tests.proc import run_killed, sent
from tests.proc import url as url  # the fixture

PLAN: dict[str, Any] = {
    "nodes": [
        {"id": "pay_a", "tool": "pay", "arguments": {"to": "a", "cents": 100}},
        {"id": "pay_b", "tool": "pay", "arguments": {"to": "b", "cents": 200}, "depends_on": ["pay_a"]},
        {"id": "books", "tool": "books", "arguments": {}, "depends_on": ["pay_b"]},
        {"id": "pay_c", "tool": "pay", "arguments": {"to": "c", "cents": 300}, "depends_on": ["books"]},
    ]
}

TOOLS = """
import json, os, signal

def add_tools(rt, outbox, die):
    @rt.tool(effect="external", idempotency="none")
    def pay(to: str, cents: int) -> str:
        "Pay someone."
        with open(outbox, "a") as f:
            f.write(json.dumps({"to": to, "cents": cents, "pid": os.getpid()}) + "\\n")
        return "paid " + to

    @rt.tool(effect="read")
    def books() -> int:
        "Read the books."
        if die:
            print("killed", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return len(open(outbox).read().splitlines())
"""

FIRST = (
    TOOLS
    + """
import sys
from actionspace import Plan, Runtime
url, outbox, plan = sys.argv[1:4]
rt = Runtime(url, recover_on_start=False)
add_tools(rt, outbox, True)
rt.run_plan(Plan.from_dict(json.loads(plan)), run_id="month-end")
print("not killed", flush=True)
"""
)


def test_a_plan_killed_between_two_steps_resumes_without_running_finished_nodes(
    url: str, tmp_path: Path
) -> None:
    outbox = tmp_path / "outbox.jsonl"
    assert run_killed(FIRST, url, str(outbox), json.dumps(PLAN)) == "killed"
    first = sent(outbox)
    assert [p["to"] for p in first] == ["a", "b"]

    rt = Runtime(url, recover_on_start=False)
    scope: dict[str, Any] = {}
    exec(TOOLS, scope)
    scope["add_tools"](rt, str(outbox), False)
    try:
        result = rt.run_plan(Plan.from_dict(PLAN), run_id="month-end")
        assert result.status == "ok", result.failed
        for node in ("pay_a", "pay_b"):
            assert result.nodes[node].diagnostics.get("replayed") is True, result.nodes[node]
            assert result.nodes[node].data == "paid " + node[-1]
        assert result.nodes["books"].data == 2  # run here: the killed process never finished it
        assert result.nodes["pay_c"].ok and not result.nodes["pay_c"].diagnostics.get("replayed")
        again = rt.run_plan(Plan.from_dict(PLAN), run_id="month-end")  # and once more: all answered
        assert again.status == "ok" and again.nodes["pay_c"].diagnostics.get("replayed") is True
    finally:
        rt.close()
    payments = sent(outbox)
    assert [p["to"] for p in payments] == ["a", "b", "c"]  # each once
    assert payments[0]["pid"] == payments[1]["pid"] != payments[2]["pid"]
