"""An async tool's first step taken without a ``StopIteration`` (``pipeline/_direct.py``).

``coro.send(None)`` reports a coroutine that returned at once by raising ``StopIteration``: the
exception is made from its value, given a traceback entry (and with it a frame object for the
caller's frame) and caught, which cost more than anything else the step does. A generator that
delegates with ``yield from`` receives the value without an exception (CPython sends through
``PyIter_Send``), so one such generator per engine, kept suspended between calls, is handed each
tool's coroutine: it stores the value in its box and yields :data:`DONE`. A call takes the
driver for itself (:func:`driver`); a call that finds it taken steps its tool by hand. A tool
that waits passes its first wait out through it as it would have itself; the driver then
belongs to that call (:func:`handed`), ends as the tool's coroutine would (returning its value,
raising its failure, forwarding ``send``, ``throw`` and ``close``), and the engine makes a new
one.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Generator
from typing import Any, Final, cast

__all__ = ["DONE", "Box", "Driver", "driver", "handed"]

DONE: Final = object()
"""What the driver yields for a coroutine that returned without waiting (its value in the box)."""

Box = list[Any]
"""A driver's ``[value, handed]``: the last value it received, and whether a call took it over."""


@types.coroutine
def _drive(box: Box) -> Generator[Any, Any, Any]:
    coro = yield
    while True:
        box[0] = yield from coro
        if box[1]:  # taken over by a call whose tool waited: ends as that coroutine would
            return box[0]
        coro = yield DONE


Driver = tuple["types.GeneratorType[Any, Any, Any]", Box, Callable[[Any], Any]]
"""A driver, its box and its bound ``send``."""


def driver() -> Driver:
    """A driver suspended where it takes a coroutine (``send(coro)``). A call takes the engine's
    driver whole (``list.pop``, one step under the GIL) and gives it back once its tool ended: a
    driver is never shared, so no other call (a tool's first step calling the engine again,
    another thread's) can send into it, read its box or find it running."""
    box: Box = [None, False]
    drive = cast("types.GeneratorType[Any, Any, Any]", _drive(box))
    drive.send(None)
    return drive, box, drive.send


def handed(box: Box) -> None:
    """The driver of ``box`` now stands for the tool's coroutine that waited inside it."""
    box[1] = True
