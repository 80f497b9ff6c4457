"""Process entry points for the durable-write tests (importable under spawn)."""

from __future__ import annotations

import threading
from multiprocessing.synchronize import Event

from actionspace import Runtime, ToolCall


def call_then_hang(path: str, returned: Event) -> None:
    """One write call (run ``r-killed``, node ``n1``), set ``returned``, then wait to be killed."""
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    @rt.tool(effect="write")
    def put(key: str, value: int) -> dict[str, int]:
        return {key: value}

    call = ToolCall(name="put", arguments={"key": "k", "value": 1})
    obs = rt.call(call, run_id="r-killed", node_id="n1")
    if obs.status == "ok":
        returned.set()
    threading.Event().wait()
