"""How the service's background runs wait for people, and how long a server's claim on a run lasts."""

from __future__ import annotations

from dataclasses import dataclass

from actionspace.service.continuation import DEFAULT_LEASE_S
from actionspace.service.lanes import DEFAULT_LANES

__all__ = ["RunnerConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunnerConfig:
    """How background runs wait for people."""

    approval_poll_s: float = 0.5
    """Seconds between reads of the approval store while a call waits; default 0.5."""
    approval_wait_s: float = 24 * 3600.0
    """Seconds a call waits for a decision before its run goes on without it; default 24 h."""
    max_rounds: int = 32
    """Most times one call or plan is sent again after decisions; default 32 (bounds every loop)."""
    resume_orphans: bool = True
    """Resume approved calls no run here waits on, and take over runs whose driver died; default on."""
    lanes: int = DEFAULT_LANES
    """Event loops the runs are spread over by principal (see ``service/lanes.py``); default 4."""
    parse_timeout_s: float = 10.0
    """Seconds parsing one raw model output may take, off the runs' loops; default 10. Past it the
    output is answered ``parse_error`` and nothing of it runs."""
    driver_lease_s: float = DEFAULT_LEASE_S
    """Seconds this server's claim on a run it drives lasts unless renewed; renewed every third of
    it while the server lives, so a run is taken over this long after its server died; default 60."""
