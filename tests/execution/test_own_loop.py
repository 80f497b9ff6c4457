"""The sync form of an async method runs it on a loop of its own, and refuses inside a running one."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Coroutine
from typing import Any

import pytest

from actionspace.errors import ConfigurationError
from actionspace.execution.loop import rounds_once, run_on_own_loop


def test_a_coroutine_runs_to_its_end_on_a_loop_of_its_own() -> None:
    async def loop_rounds_once() -> bool:
        return rounds_once(asyncio.get_running_loop())

    assert run_on_own_loop(loop_rounds_once, misuse="unused") == hasattr(select, "epoll")


def test_inside_a_running_loop_it_raises_without_making_the_coroutine() -> None:
    started: list[int] = []

    async def work() -> int:
        return 1

    def start() -> Coroutine[Any, Any, int]:
        started.append(1)
        return work()

    async def caller() -> None:
        with pytest.raises(ConfigurationError, match="await it instead"):
            run_on_own_loop(start, misuse="await it instead")

    asyncio.run(caller())
    assert started == []
