"""What a route reads from its application: the runtime and the background runner."""

from __future__ import annotations

from fastapi import Request

from actionspace.runtime import Runtime
from actionspace.service.runner import BackgroundRuns

__all__ = ["runner_of", "runtime_of"]


def runtime_of(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def runner_of(request: Request) -> BackgroundRuns:
    runner: BackgroundRuns = request.app.state.runner
    return runner
