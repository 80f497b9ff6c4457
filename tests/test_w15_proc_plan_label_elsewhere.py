"""A plan running in one process while another process reads a secret in the same run: the plan's
nodes checked after that secret's label was saved are judged by it, as they are when the secret is
read in the same process (and as a single call is, which merges the stored state before it runs).

The plan's first node (a slow lookup) blocks until the other process — a real one, on the same
SQLite file or PostgreSQL database — has read the secret in the run and saved its label; only
then is the node released and the plan's send checked. Read in this process instead, the secret
blocks the send (``policy_violation``); read in the other, the send went out.
"""

from __future__ import annotations

import textwrap
import threading

from actionspace import Labels, Plan, Runtime
from tests.proc import DEADLINE_S, run_child
from tests.proc import url as url  # the fixture

PASSWORD = "hunter2-correct-horse"

_READ_SECRET = textwrap.dedent(
    """
    import json, sys
    from actionspace import Labels, Runtime

    rt = Runtime(sys.argv[1], recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2-correct-horse"

    obs = rt.call({"name": "read_password", "arguments": {}}, run_id="conv")
    label = str(rt.context_label("conv"))
    rt.close()
    print(json.dumps({"status": obs.status, "label": label}))
    """
)

PLAN = {
    "nodes": [
        {"id": "look", "tool": "slow_lookup", "arguments": {"who": "eve"}},
        {
            "id": "send",
            "tool": "send_email",
            "arguments": {"recipient": {"$ref": "look.data"}, "body": PASSWORD},
        },
    ]
}


def _plan_beside(url: str, secret_here: bool) -> tuple[dict[str, str], list[str]]:
    """Run :data:`PLAN` in run ``conv`` while the secret is read in this process or in another
    one; each node's outcome (status or error category) and the bodies sent."""
    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []
    running, release = threading.Event(), threading.Event()

    @rt.tool(effect="read")
    def slow_lookup(who: str) -> str:
        """Look someone's address up in a slow directory."""
        running.set()
        assert release.wait(DEADLINE_S)
        return f"{who}@example.com"

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        """Read the stored password."""
        return PASSWORD

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    def read_the_secret() -> None:
        try:
            assert running.wait(DEADLINE_S)
            if secret_here:
                assert rt.call({"name": "read_password", "arguments": {}}, run_id="conv").ok
            else:
                assert run_child(_READ_SECRET, url) == {"status": "ok", "label": "secret/trusted"}
        finally:
            release.set()

    try:
        reader = threading.Thread(target=read_the_secret)
        reader.start()
        try:
            result = rt.run_plan(Plan.from_dict(PLAN), run_id="conv")
        finally:
            release.set()
            reader.join(DEADLINE_S)
        nodes: dict[str, str] = {
            k: (v.error.category if v.error else v.status) for k, v in result.nodes.items()
        }
        return nodes, sent
    finally:
        rt.close()


def test_a_secret_read_in_this_process_while_a_plan_runs_blocks_its_later_send(url: str) -> None:
    assert _plan_beside(url, secret_here=True) == ({"look": "ok", "send": "policy_violation"}, [])


def test_a_secret_read_in_another_process_while_a_plan_runs_blocks_its_later_send(url: str) -> None:
    assert _plan_beside(url, secret_here=False) == ({"look": "ok", "send": "policy_violation"}, [])
