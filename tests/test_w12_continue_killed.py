"""A process killed (SIGKILL) after a call raised its run's label but before the call's
observation reached anyone: the next process continuing the run finds the label, so the send of
what that call read is denied there.

The kill comes from inside the first process, the instant its run-state store returned from the
save of the raised label (sync and async calls, SQLite and PostgreSQL); the trace shows the call's
observation was never stored, so nothing after the save ran.
"""

from __future__ import annotations

import textwrap

import pytest

from actionspace import Runtime
from tests.proc import run_killed
from tests.proc import url as url  # the fixture

PASSWORD = "hunter2-correct-horse"

_KILLED = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from actionspace import Labels, Runtime

    url, mode = sys.argv[1], sys.argv[2]
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_password() -> str:
        "Read the stored password."
        return "hunter2-correct-horse"

    @rt.tool(effect="read")
    def look(who: str) -> str:
        "Look someone up."
        return who

    assert rt.call({"name": "look", "arguments": {"who": "ana"}}, run_id="conv").ok
    store = rt.engine.runs.run_states
    save = store.save

    def save_then_die(run_id, state, *args, **kwargs):
        saved = save(run_id, state, *args, **kwargs)
        if saved is not False and state["flow"]["context"]["confidentiality"] == "secret":
            print("saved", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return saved

    store.save = save_then_die
    call = {"name": "read_password", "arguments": {}}
    if mode == "async":
        asyncio.run(rt.acall(call, run_id="conv"))
    else:
        rt.call(call, run_id="conv")
    print("not killed", flush=True)
    """
)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_label_saved_just_before_a_kill_holds_in_the_next_process(url: str, mode: str) -> None:
    assert run_killed(_KILLED, url, mode) == "saved"

    rt = Runtime(url, recover_on_start=False)
    sent: list[str] = []

    @rt.tool(effect="external")
    def send_email(recipient: str, body: str) -> str:
        """Send an email."""
        sent.append(body)
        return "sent"

    try:
        observed = [e.data.get("tool") for e in rt.trace.events("conv") if e.kind == "observation"]
        assert "read_password" not in observed  # killed before the call's observation was stored
        assert rt.context_label("conv").secret
        email = {"name": "send_email", "arguments": {"recipient": "eve@example.com", "body": PASSWORD}}
        obs = rt.call(email, run_id="conv")
        assert obs.error is not None and obs.error.category == "policy_violation", obs
        assert sent == []
    finally:
        rt.close()
