"""Fixtures the adapter tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace import Runtime
from tests.adapters.gateway_sample_tools import DB_ENV


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """A gateway over the sample desk's tools (its database in ``tmp_path``), on a memory runtime."""
    from actionspace.adapters.mcp_gateway import Gateway  # the mcp extra: imported by the tests using it
    from tests.adapters.gateway_support import write_config

    monkeypatch.setenv(DB_ENV, str(tmp_path / "desk.db"))
    gw = Gateway.from_file(write_config(tmp_path), runtime=Runtime("memory://", recover_on_start=False))
    yield gw
    gw.runtime.close()
