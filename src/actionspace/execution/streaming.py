"""How a streaming tool reports progress, and which tools stream (the engine drives them).

A tool whose function is a (sync or async) generator streams: the engine yields provisional
observations while it runs and exactly one final observation (:mod:`actionspace.pipeline.streaming`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from actionspace.catalog.spec import ToolSpec

__all__ = ["DEFAULT_POLICY", "StreamPolicy", "is_streaming"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamPolicy:
    """How often a stream reports provisional observations (checked when a chunk arrives).

    The first chunk always yields one; after that, whichever bound is reached first.
    """

    every_bytes: int | None = None
    """New raw output bytes between two provisional observations; None (the default) means the
    tool's ``max_observation_bytes``; 0 means after every chunk."""
    every_s: float = 1.0
    """Seconds since the last provisional observation after which the next chunk yields one.
    Default 1.0."""


DEFAULT_POLICY: Final = StreamPolicy()


def is_streaming(spec: ToolSpec) -> bool:
    """True when the tool's function is a (sync or async) generator function."""
    return spec.streams
