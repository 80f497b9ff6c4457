"""The runtime's discovery settings and the index it keeps of the catalog."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace.catalog.registry import Catalog
from actionspace.discovery.candidates import Availability, CandidateIndex, Selection, request_of
from actionspace.discovery.disclosure import DESCRIBE_TOOL
from actionspace.discovery.ranking import Embedder
from actionspace.policy.principal import Principal
from actionspace.trace.events import TraceEvent

__all__ = ["Discovery", "DiscoveryConfig", "error_category", "errors_in_trace"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DiscoveryConfig:
    """How a Runtime builds offers (``Runtime(discovery=DiscoveryConfig(...))``)."""

    disclosure: bool = False
    """Progressive disclosure by default: offers show name, summary and risk, and a tool must be
    described in the run before it can be called. Default False (offers carry full definitions)."""
    limit: int | None = None
    """Rank cut of offers that pass a ``query`` and no ``limit`` of their own; None (default) = none."""
    availability: Mapping[str, Availability] = field(default_factory=dict)
    """Per tool name: phases, required capabilities, errors it recovers from. Default: none."""
    embedder: Embedder | None = None
    """Blended into the BM25 ranking when set (e.g. ``MiniLMEmbedder()``). Default None (lexical only)."""
    embedding_weight: float = 0.5
    """Share of the embedding cosine in the blended score, in [0, 1]. Default 0.5."""
    describe_tool: bool = True
    """Register ``describe_tool`` so the model can read definitions itself (offered in disclosure
    runs only). Default True."""


class Discovery:
    """The runtime's discovery state: settings, per-tool availability and the catalog's index.

    The index is rebuilt when the catalog or the availability changes; thread-safe.
    """

    def __init__(self, config: DiscoveryConfig) -> None:
        self.config = config
        self._availability: dict[str, Availability] = dict(config.availability)
        self._lock = threading.Lock()
        self._index: CandidateIndex | None = None
        self._built_for: tuple[int, int] = (-1, -1)
        self._version = 0

    def annotate(
        self,
        name: str,
        *,
        phases: Iterable[str] = (),
        requires: Iterable[str] = (),
        recovers: Iterable[str] = (),
    ) -> None:
        """Declare when tool ``name`` may be offered (replaces an earlier declaration)."""
        with self._lock:
            self._availability[name] = Availability(
                phases=tuple(phases), requires=tuple(requires), recovers=tuple(recovers)
            )
            self._version += 1

    def availability(self, name: str) -> Availability | None:
        """What was declared for ``name`` (None = no constraint)."""
        return self._availability.get(name)

    def index(self, catalog: Catalog) -> CandidateIndex:
        """The index of ``catalog`` as it is now (``describe_tool`` excluded: it is offered apart)."""
        with self._lock:
            stamp = (catalog.generation, self._version)
            if self._index is None or self._built_for != stamp:
                specs = [s for s in catalog.offerable() if s.name != DESCRIBE_TOOL]
                retired = [s.key for s in catalog if s.lifecycle == "retired"]
                self._index = CandidateIndex(
                    specs,
                    retired=retired,
                    availability=self._availability,
                    embedder=self.config.embedder,
                    embedding_weight=self.config.embedding_weight,
                )
                self._built_for = stamp
            return self._index

    def select(self, catalog: Catalog, principal: Principal, **request: Any) -> Selection:
        """The selection ``catalog`` gives ``principal`` for a request of plain values.

        ``request`` takes the keywords of :func:`~actionspace.discovery.candidates.request_of`
        (query, limit, phase, capabilities, errors, names): a caller holding only the runtime's
        discovery (the trace replay) asks again without importing this layer.
        """
        return self.index(catalog).select(request_of(principal, **request))


def errors_in_trace(events: Iterable[TraceEvent]) -> set[str]:
    """Error categories of the error observations among ``events`` (what unlocks recovery tools)."""
    return {c for e in events if (c := error_category(e.kind, e.data)) is not None}


def error_category(kind: str, data: Mapping[str, Any]) -> str | None:
    """The category of an event that is an error observation, else None."""
    if kind != "observation":
        return None
    category = data.get("category")
    return category if data.get("status") == "error" and isinstance(category, str) else None
