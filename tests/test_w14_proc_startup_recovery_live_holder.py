"""A process that starts while another still runs a write: its start-up recovery must not settle
the write's entry while the tool it calls may still be inside its own timeout.

The first process (a real child) sends a payment whose tool may take ``timeout_s`` = 120 s; the
tool blocks until the test releases it (a file), so it is inside its timeout for as long as the
test wants. The second process (this one) starts 45 s later by its clock (a ``Clock`` ahead of
the wall; the entry is older than the 30 s start-up age, far younger than its tool's timeout).
Its start-up recovery used to ask the status — "not committed", the tool still runs — and put
the entry back to ``accepted``: proposed again, the payment was sent a second time.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from actionspace import Runtime, ToolCall
from actionspace.ledger.commit import new_entry
from tests.proc import PAY_ONCE, PAY_TOOLS, Ahead, Child, add_script_tools, sent
from tests.proc import url as url  # the fixture

AHEAD_S = 45.0
"""How much later than the first process the second starts, by its clock."""

_TOOLS = PAY_TOOLS + textwrap.dedent(
    """
    def add_tools(rt, outbox, release):
        def running(attempt):
            print("running", flush=True)
            wait_for(release)  # inside its timeout until the test releases it

        add_pay_tools(
            rt, outbox, before=running, timeout_s=120.0,
            description="Pay someone; may take up to two minutes.",
        )
    """
)

_FIRST = _TOOLS + PAY_ONCE


def test_a_process_starting_beside_a_running_write_leaves_its_entry_to_its_holder(
    url: str, tmp_path: Path
) -> None:
    outbox, release = tmp_path / "outbox.jsonl", tmp_path / "release"
    with Child(_FIRST, url, str(outbox), str(release)) as first:
        try:
            first.expect("running")

            second = Runtime(url, clock=Ahead(AHEAD_S))  # recovery at its first call, as any process starts
            try:
                add_script_tools(second, _TOOLS, str(outbox), str(release))  # the very tools the first has
                assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
                (entry,) = second.ledger.list()
                assert entry.state == "dispatched", entry  # still the first process's, still running

                release.touch()
                assert first.result() == {"status": "ok", "error": None}

                again = ToolCall(name="pay", arguments={"to": "bob", "cents": 500}, id="c2")
                obs = second.call(again, run_id="r", node_id="pay")
                assert obs.ok and obs.diagnostics.get("replayed") is True, obs
            finally:
                second.close()
        finally:
            release.touch()
    assert [s["cents"] for s in sent(outbox)] == [500]


def test_the_start_up_recovery_still_settles_an_entry_no_holder_can_still_run(tmp_path: Path) -> None:
    """The skip is bounded by the tool's timeout: an entry older than any holder could take is
    settled at start, as before (here found committed by its status query)."""
    url, outbox = f"sqlite:///{tmp_path / 'run.db'}", tmp_path / "outbox.jsonl"
    with Runtime(url, recover_on_start=False) as rt:
        add_script_tools(rt, _TOOLS, str(outbox), str(tmp_path / "release"))
        spec = rt.catalog.get("pay")
        entry = new_entry(
            key="as1_" + "1" * 32, run_id="r", node_id="pay", spec=spec, arguments={"to": "bob"}
        )
        rt.ledger.begin(entry)
        rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
    outbox.write_text(json.dumps({"to": "bob", "cents": 500}) + "\n")

    # past its retries' deadline (30 s, the default), twice its timeout and the late wait
    later = Ahead(30.0 + 2 * 120.0 + 31.0)
    with Runtime(url, clock=later) as rt:
        add_script_tools(rt, _TOOLS, str(outbox), str(tmp_path / "release"))
        assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
        stored = rt.ledger.get(entry.key)
        assert stored is not None and stored.state == "committed", stored
