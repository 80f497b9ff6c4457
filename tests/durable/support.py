"""What the durable tests share: a runtime running durable plans in this process, and waiting for
a plan's approval request to be filed."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from actionspace import Runtime
from actionspace.approval.requests import ApprovalRequest
from actionspace.durable import DurableConfig, launch, shutdown


def pending_request(rt: Runtime, run_id: str, deadline_s: float = 60.0) -> ApprovalRequest:
    """The first pending approval request of ``run_id``, waited for up to ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = [r for r in rt.approvals.list(status="pending") if r.run_id == run_id]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no approval request of {run_id} within {deadline_s} s")


def launched(store: str, tools: ModuleType, **config: Any) -> Iterator[Runtime]:
    """A runtime on ``store`` running durable plans in this process (a DBOS system schema of its
    own, ``config`` the rest of its :class:`DurableConfig`), with ``tools`` (a module with
    ``prepare(store)`` and ``register(runtime)``) registered; shut down when the caller is done."""
    tools.prepare(store)
    durable = DurableConfig(system_schema=f"dbos_{uuid.uuid4().hex[:8]}", **config)
    runtime = Runtime(store=store, plan_backend="dbos", durable=durable, recover_on_start=False)
    tools.register(runtime)
    launch(runtime, durable)
    try:
        yield runtime
    finally:
        shutdown()
        runtime.close()
