"""Shared by the tests that make a store stop answering under a call: the exception a driver
raises, a store method switched to raising it, and the durable stores to try it on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


class StoreDown(Exception):
    """What a driver raises when its database does not answer."""


def down(store: Any, method: str) -> Callable[[], None]:
    """Make ``store.method`` raise :class:`StoreDown`; the returned function puts it back."""
    real = getattr(store, method)

    def raising(*args: Any, **kwargs: Any) -> Any:
        raise StoreDown("the database does not answer")

    setattr(store, method, raising)
    return lambda: setattr(store, method, real)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh SQLite file, or a fresh schema of the throwaway PostgreSQL cluster."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'a.db'}"
    else:
        from tests.pg import fresh_schema

        yield from fresh_schema(request.getfixturevalue("pg_url"))
