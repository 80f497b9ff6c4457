from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.trace.events import TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    """Each behaviour test runs once per store implementation."""
    opened: TraceStore = (
        MemoryTraceStore() if request.param == "memory" else SqliteTraceStore(tmp_path / "t.db")
    )
    yield opened
    opened.close()
