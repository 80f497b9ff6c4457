"""A call that ``close()`` could not end before the stores closed (a sync call whose tool runs on
past :data:`~actionspace._closing.SYNC_CALL_WAIT_S`) may still save its run's state after
``close()`` returned: the run-state store stays open for it, so that save is not lost (the next
runtime reads the run's label back). Once the last such call has saved, the store closes: the
process keeps no descriptor on the SQLite file (it used to keep the run-state store's connections
for good)."""

from __future__ import annotations

import threading
from pathlib import Path

from actionspace import Labels, Observation, Runtime
from tests.close_tools import WAIT_S, in_thread, open_on


def test_the_run_state_store_closes_once_the_last_call_running_past_close_saved(tmp_path: Path) -> None:
    path = tmp_path / "w11.db"
    url = f"sqlite:///{path}"
    rt = Runtime(url, recover_on_start=False)
    started, release = threading.Event(), threading.Event()

    @rt.tool(effect="read", labels=Labels(confidentiality="secret"))
    def read_secret() -> str:
        """A secret read that answers once the test releases it: its run's label changes, and
        the run's state is saved before its observation is returned."""
        started.set()
        release.wait(WAIT_S)
        return "hunter2"

    run_id = rt.new_run()
    assert not rt.context_label(run_id).secret
    caller, answered = in_thread(lambda: rt.call({"name": "read_secret", "arguments": {}}, run_id=run_id))
    try:
        assert started.wait(WAIT_S)
        rt.close()  # waits SYNC_CALL_WAIT_S for the call, which runs on: it returns first
        assert caller.is_alive()
    finally:
        release.set()
    caller.join(WAIT_S)
    assert not caller.is_alive()
    [obs] = answered
    assert isinstance(obs, Observation) and obs.error is not None and obs.error.category == "cancelled", obs
    assert open_on(path) == [], "descriptors left on the file once the last call running past close() ended"
    again = Runtime(url, recover_on_start=False)
    try:
        assert again.context_label(run_id).secret, "the state the call saved after close() was lost"
    finally:
        again.close()
    assert open_on(path) == []
