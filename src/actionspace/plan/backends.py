"""Plan backends other than the in-process scheduler, found by name through entry points.

A backend is an async function ``(runtime, plan, *, run_id, principal, max_concurrency, config)
-> PlanResult`` published under the ``actionspace.plan_backends`` entry-point group (this
package publishes ``dbos``: :func:`actionspace.durable.backend.arun_plan_durable`). The runtime
looks it up by the name given as ``plan_backend`` / ``backend=``, so the core never imports an
optional part (DESIGN §2: edges wrap the public API).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points
from typing import Any

from actionspace.errors import ConfigurationError
from actionspace.plan.model import PlanResult

__all__ = ["ENTRY_POINT_GROUP", "PlanBackend", "backend_names", "load_backend"]

ENTRY_POINT_GROUP = "actionspace.plan_backends"

PlanBackend = Callable[..., Awaitable[PlanResult]]


def backend_names() -> list[str]:
    """The names of the installed plan backends besides ``inprocess``."""
    return sorted(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))


@functools.cache
def load_backend(name: str) -> PlanBackend:
    """The backend published as ``name``; ConfigurationError when none is installed under it.

    Found once per name and process: reading the entry points scans every installed distribution
    (about 11 ms here), which ``run_plan`` would otherwise pay on every plan. A name not found is
    looked up again next time (errors are not kept).
    """
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            found: Any = ep.load()
            backend: PlanBackend = found
            return backend
    names = ["inprocess", *backend_names()]
    raise ConfigurationError(f"no plan backend {name!r} is installed (plan_backend=); one of {names}")
