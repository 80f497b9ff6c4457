"""One counter of everything a precompiled call's entry was decided from.

A plain plan node's call (``pipeline/fast_nodes.py``) keeps its tool's precompiled entry once per
plan and tool instead of checking per node that the run's resolution, the catalog, the flow policy,
the engine's stages, its guard and its cursor key are the ones the entry was built under. Whatever
changes one of them moves :data:`EPOCH`, so an entry kept at another value is checked again:
``Catalog`` when a tool is registered or changes lifecycle (``drop`` needs no move: it takes only a
retired version, whose retirement moved the counter, and no entry of a retired version is kept
after that); ``RunState`` when its offer changes (its resolutions
dropped, its disclosure set) or is read back from a snapshot; ``Stages`` when any of its fields is
set (the flow policy, the guard, the cursor key); the engine when a stage is added. (A resolution
made anew needs no move of its own: the one it replaces was dropped, or made under another
catalog generation, and either moved the counter.)
"""

from __future__ import annotations

from typing import Final

__all__ = ["EPOCH", "bump"]

EPOCH: Final[list[int]] = [0]
"""The counter (a list, read as ``EPOCH[0]`` without a call); only ever increased."""


def bump() -> None:
    """Something a precompiled entry was decided from changed: every kept entry is checked again.

    Not locked: two bumps racing may write the same value, which still differs from every value
    an entry was kept at before either change (each change is made before its bump)."""
    EPOCH[0] += 1
