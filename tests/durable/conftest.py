"""Fixtures of the durable backend tests: a fresh schema per test on the session's PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pg import fresh_schema


@pytest.fixture
def store(pg_url: str) -> Iterator[str]:
    """A ``postgresql://`` URL whose tables live in a schema of this test only."""
    yield from fresh_schema(pg_url)
