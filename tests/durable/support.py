"""What the durable tests share: waiting for a plan's approval request to be filed."""

from __future__ import annotations

import time

from actionspace import Runtime
from actionspace.approval.requests import ApprovalRequest


def pending_request(rt: Runtime, run_id: str, deadline_s: float = 60.0) -> ApprovalRequest:
    """The first pending approval request of ``run_id``, waited for up to ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = [r for r in rt.approvals.list(status="pending") if r.run_id == run_id]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no approval request of {run_id} within {deadline_s} s")
