"""What a route reads from its application: the runtime, the background runner, the live runs."""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import Depends, Request

from actionspace.errors import ApiError
from actionspace.runtime import Runtime
from actionspace.service.auth import authenticated
from actionspace.service.quotas import HeldBytes, LiveRuns
from actionspace.service.runner import BackgroundRuns

__all__ = [
    "held_bytes_of",
    "ids_storable",
    "live_runs_of",
    "query_once",
    "route_checks",
    "runner_of",
    "runtime_of",
]


def runtime_of(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def runner_of(request: Request) -> BackgroundRuns:
    runner: BackgroundRuns = request.app.state.runner
    return runner


def live_runs_of(request: Request) -> LiveRuns:
    live: LiveRuns = request.app.state.live_runs
    return live


def held_bytes_of(request: Request) -> HeldBytes:
    held: HeldBytes = request.app.state.held_bytes
    return held


def route_checks(*, token: bool = True) -> list[Any]:
    """The checks an API route runs ahead of its own dependencies, in this order: who the caller
    is (:func:`~actionspace.service.auth.authenticated`; ``token=False``: a route that needs no
    token), then its path ids (:func:`ids_storable`) and its query (:func:`query_once`). So a
    caller without a good token is answered 401 (or 429) before anything of the request is
    judged; a request with a body was authenticated before it was read, and is not counted again."""
    checks = [Depends(ids_storable), Depends(query_once)]
    return [Depends(authenticated), *checks] if token else checks


def ids_storable(request: Request) -> None:
    """Answers 404 for a path id holding a NUL: no run, request, entry or tool has one, and
    PostgreSQL's text cannot hold one (asked for it, the store fails instead of finding nothing)."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and "\x00" in value:
            raise ApiError(404, f"no such {name.removesuffix('_id')}: no id holds a NUL character")


def query_once(request: Request) -> None:
    """Answers 422 for a query parameter given twice: no route takes a list, and a proxy's filter
    may read the first value where the route would read the last, so neither is sure to be meant."""
    counted = Counter(name for name, _ in request.query_params.multi_items())
    twice = sorted(name for name, n in counted.items() if n > 1)
    if twice:
        raise ApiError(
            422,
            f"query parameter {twice[0][:40]!r} is given more than once; give it once",
            category="invalid_arguments",
        )
