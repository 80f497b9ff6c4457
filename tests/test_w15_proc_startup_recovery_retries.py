"""A process that starts while another still retries a write: its start-up recovery must leave the
write's entry alone for as long as the retries may go on, not only for two of the tool's timeouts.

The first process (a real child) sends a payment through a tool with a short ``timeout_s`` (10 s)
and retries allowed for minutes (``RetryPolicy(deadline_s=300)``): the first attempt finds the
service refusing connections (``transient``: nothing sent), the second blocks until the test
releases it (a file), so the send is still live. The second process (this one) starts 65 s later
by its clock — past the old wait of 2 × 10 s + 30 s, well within the retries' deadline. Its
start-up recovery used to ask the status ("not committed": the retry still runs) and put the
entry back to ``accepted``, so the payment could be sent a second time.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from actionspace import RetryPolicy, Runtime, ToolCall
from actionspace.catalog.spec import NO_RETRY
from actionspace.ledger.commit import MAX_WAIT_S, RECOVERY_AGE_S, new_entry
from actionspace.ledger.recover import holder_window
from tests.proc import PAY_ONCE, PAY_TOOLS, Ahead, Child, add_script_tools, sent
from tests.proc import url as url  # the fixture

TIMEOUT_S = 10.0
"""Long enough that the test's release, after the second process's checks, comes before the retry's
timeout and its wait for a late answer end, however slow the machine (past them the first process
would answer ``unknown_commit``, rightly, instead of ``ok``)."""
RETRY_DEADLINE_S = 300.0
AHEAD_S = 2 * TIMEOUT_S + 30.0 + 15.0
"""How much later than the first process the second starts, by its clock: past the old window."""

_TOOLS = PAY_TOOLS + textwrap.dedent(
    """
    from actionspace import RetryPolicy

    def add_tools(rt, outbox, release, flaky=True):
        def service(attempt):
            if flaky and attempt == 1:
                raise ConnectionRefusedError("the payment service is restarting")  # nothing sent
            if flaky:
                print("retrying", flush=True)
                wait_for(release)  # the retry is live until the test releases it

        add_pay_tools(
            rt, outbox, before=service, timeout_s=%(timeout)r, description="Pay someone.",
            retry=RetryPolicy(max_attempts=20, deadline_s=%(deadline)r, initial_backoff_s=0.001),
        )
    """
) % {"timeout": TIMEOUT_S, "deadline": RETRY_DEADLINE_S}

_FIRST = _TOOLS + PAY_ONCE


def _add_tools(rt: Runtime, outbox: Path, release: Path) -> None:
    """The very tools the first process has; the payment service answers this process at once."""
    add_script_tools(rt, _TOOLS, str(outbox), str(release), flaky=False)


def test_a_process_starting_beside_a_retrying_write_leaves_its_entry_to_its_holder(
    url: str, tmp_path: Path
) -> None:
    outbox, release = tmp_path / "outbox.jsonl", tmp_path / "release"
    with Child(_FIRST, url, str(outbox), str(release)) as first:
        try:
            first.expect("retrying")

            second = Runtime(url, clock=Ahead(AHEAD_S))  # recovery at its first call, as a process starts
            try:
                _add_tools(second, outbox, release)
                assert second.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
                (entry,) = second.ledger.list()
                assert entry.state == "dispatched", entry  # still the first process's, still retrying

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


def test_the_start_up_recovery_still_settles_an_entry_past_its_retries(tmp_path: Path) -> None:
    """The wait is bounded by the retries' deadline: an entry older than any retry of it could run
    is settled at start, as before (here found committed by its status query)."""
    url, outbox = f"sqlite:///{tmp_path / 'run.db'}", tmp_path / "outbox.jsonl"
    with Runtime(url, recover_on_start=False) as rt:
        _add_tools(rt, outbox, tmp_path / "release")
        spec = rt.catalog.get("pay")
        entry = new_entry(
            key="as1_" + "1" * 32, run_id="r", node_id="pay", spec=spec, arguments={"to": "bob"}
        )
        rt.ledger.begin(entry)
        rt.ledger.transition(entry.key, ("accepted",), entry.evolve(state="dispatched", attempts=1))
    outbox.write_text(json.dumps({"to": "bob", "cents": 500}) + "\n")

    with Runtime(url, clock=Ahead(holder_window(spec) + 1.0)) as rt:
        _add_tools(rt, outbox, tmp_path / "release")
        assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="other").ok
        stored = rt.ledger.get(entry.key)
        assert stored is not None and stored.state == "committed", stored


@pytest.mark.parametrize("timeout_s", [0.5, 2.0, 30.0, 600.0])
@pytest.mark.parametrize("attempts", [1, 2, 50])
def test_the_window_covers_every_attempt_the_retries_may_start(timeout_s: float, attempts: int) -> None:
    """The last attempt starts before the retries' deadline and may take the tool's timeout, then
    the wait for a late answer: the window covers that, and never shrinks below the old one."""
    with Runtime("memory://", recover_on_start=False) as rt:
        for name, retry in (
            ("none", NO_RETRY),
            ("some", RetryPolicy(max_attempts=attempts, deadline_s=RETRY_DEADLINE_S)),
        ):
            rt.add_tool(
                name=name,
                fn=lambda: "ok",
                effect="external",
                timeout_s=timeout_s,
                retry=retry,
                input_schema={"type": "object"},
            )
        old = max(RECOVERY_AGE_S, 2 * timeout_s + MAX_WAIT_S)
        assert holder_window(rt.catalog.get("none")) == old
        window = holder_window(rt.catalog.get("some"))
        assert window >= old
        if attempts > 1:
            assert window >= RETRY_DEADLINE_S + timeout_s + min(timeout_s, MAX_WAIT_S)
