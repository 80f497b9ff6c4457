"""What a route reads from its application: the runtime and the background runner."""

from __future__ import annotations

from fastapi import Request

from actionspace.errors import ApiError
from actionspace.runtime import Runtime
from actionspace.service.runner import BackgroundRuns

__all__ = ["ids_storable", "runner_of", "runtime_of"]


def runtime_of(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def runner_of(request: Request) -> BackgroundRuns:
    runner: BackgroundRuns = request.app.state.runner
    return runner


def ids_storable(request: Request) -> None:
    """Answers 404 for a path id holding a NUL: no run, request, entry or tool has one, and
    PostgreSQL's text cannot hold one (asked for it, the store fails instead of finding nothing)."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise ApiError(404, f"no such {name.removesuffix('_id')}: no id holds a NUL character")
