"""The HTTP service: a JSON API under ``/api`` (runs, traces, approvals, ledger, catalog, metrics).

``create_app(runtime, tokens=...)`` builds the FastAPI application; ``actionspace serve`` runs it
with uvicorn. Requests authenticate with ``Authorization: Bearer <token>``; each token maps to a
:class:`~actionspace.policy.principal.Principal` whose scopes gate the routes (see ``auth.py``).
The names below load FastAPI on first use, so the command line starts without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actionspace.service.app import create_app
    from actionspace.service.auth import SCOPES, admin_principal
    from actionspace.service.runner import BackgroundRuns, RunnerConfig

__all__ = ["SCOPES", "BackgroundRuns", "RunnerConfig", "admin_principal", "create_app"]

_HOMES = {
    "create_app": "actionspace.service.app",
    "SCOPES": "actionspace.service.auth",
    "admin_principal": "actionspace.service.auth",
    "BackgroundRuns": "actionspace.service.runner",
    "RunnerConfig": "actionspace.service.runner",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'actionspace.service' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
