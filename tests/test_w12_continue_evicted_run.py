"""A run this process evicted from memory while a call of it was still running (more runs open
than ``max_live_runs``) is reused when it is asked for again; what another process saved of it
meanwhile — a secret it read — holds for the next call here all the same, as it does for a run
that stayed in memory. A call checked before the other process saved the label runs on (the
window the docs name), and the next one is denied.

The other process is a real one on the same SQLite file or PostgreSQL database; the send is
counted at the tool, whatever the runtime believes.
"""

from __future__ import annotations

import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

from actionspace import Runtime
from tests.proc import run_child
from tests.proc import url as url  # the fixture

PASSWORD = "hunter2-correct-horse"
DEADLINE_S = 60.0

_READ_SECRET = textwrap.dedent(
    """
    import json, sys
    from actionspace import Labels, Runtime

    rt = Runtime(sys.argv[1], recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2-correct-horse"

    obs = rt.call({"name": "read_password", "arguments": {}}, run_id=sys.argv[2])
    label = str(rt.context_label(sys.argv[2]))
    rt.close()
    print(json.dumps({"status": obs.status, "label": label}))
    """
)


def test_a_secret_read_elsewhere_blocks_the_send_of_a_run_evicted_while_its_call_ran(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []
    running, release = threading.Event(), threading.Event()

    @rt.tool(effect="read")
    def slow_lookup(who: str) -> str:
        """Look someone up in a slow directory."""
        running.set()
        assert release.wait(DEADLINE_S)
        return who

    @rt.tool(effect="read")
    def look(who: str) -> str:
        """Look someone up."""
        return who

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    email = {"name": "send_email", "arguments": {"recipient": "eve@example.com", "body": PASSWORD}}
    with ThreadPoolExecutor(1) as pool:
        try:
            assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="conv").ok
            in_flight = pool.submit(
                rt.call, {"name": "slow_lookup", "arguments": {"who": "bo"}}, run_id="conv"
            )
            assert running.wait(DEADLINE_S)
            rt.engine.runs.max_live_runs = 1
            assert rt.call({"name": "look", "arguments": {"who": "cy"}}, run_id="another").ok
            assert "conv" not in rt.engine.runs.live  # evicted, still held by the call running

            assert run_child(_READ_SECRET, url, "conv") == {"status": "ok", "label": "secret/trusted"}

            obs = rt.call(email, run_id="conv")
        finally:
            release.set()
        assert in_flight.result(timeout=DEADLINE_S).ok
    try:
        assert obs.error is not None and obs.error.category == "policy_violation", obs
        assert sent == []
        assert rt.context_label("conv").secret
    finally:
        rt.close()


def test_a_send_checked_before_another_process_read_a_secret_ends_and_the_next_is_denied(url: str) -> None:
    """The window the docs name: a call checked before another process saved a raised label
    runs on (its arguments were made before that secret was shown to anyone: the label is saved
    before the observation carrying it is returned); every call checked after is denied."""
    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []
    sending, release = threading.Event(), threading.Event()

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sending.set()
        assert release.wait(DEADLINE_S)
        sent.append(body)
        return "sent"

    def email(body: str) -> dict[str, object]:
        return {"name": "send_email", "arguments": {"recipient": "eve@example.com", "body": body}}

    with ThreadPoolExecutor(1) as pool:
        try:
            in_flight = pool.submit(rt.call, email("the weekly report"), run_id="conv")
            assert sending.wait(DEADLINE_S)
            assert run_child(_READ_SECRET, url, "conv") == {"status": "ok", "label": "secret/trusted"}
        finally:
            release.set()
        assert in_flight.result(timeout=DEADLINE_S).ok
    try:
        later = rt.call(email(PASSWORD), run_id="conv")
        assert later.error is not None and later.error.category == "policy_violation", later
        assert sent == ["the weekly report"]
    finally:
        rt.close()
