"""What the timeline scripts share: their command line, and running their rounds on the chosen loop."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from actionspace.execution.loop import LOOPS, new_event_loop

T = TypeVar("T")


def arguments(doc: str | None, rounds: int, each: str) -> argparse.Namespace:
    """``--rounds`` (``rounds`` by default; ``each``: what a round runs) and ``--loop``."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=rounds, help=f"rounds, each {each}")
    parser.add_argument(
        "--loop", choices=LOOPS, default="once", help="the event loop (as actionspace bench --loop)"
    )
    return parser.parse_args()


def run_on(loop: str, main: Coroutine[Any, Any, T]) -> T:
    """``main`` run to its end on ``loop`` (one of :data:`LOOPS`)."""
    if loop == "once":
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            return runner.run(main)
    return asyncio.run(main)
