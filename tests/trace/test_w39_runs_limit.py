"""``runs(limit=...)`` refuses alike in every store a limit that is not a positive int.

Memory dropped the last run for ``-1``, SQLite listed every run, PostgreSQL raised a driver error;
each now raises the same ``ValueError`` before it reads anything, and a very large limit lists
every run everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from actionspace.trace.cli import trace_app
from actionspace.trace.events import TraceEvent, TraceStore
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore

REFUSED: list[Any] = [0, -1, -(2**70), True, False, 1.0, 2.5, "3", None, float("nan")]
MESSAGE = "limit must be a positive int"


def _fill(store: TraceStore) -> None:
    store.append_many(
        [TraceEvent(run_id=f"r{i}", seq=0, kind="run_started", ts=10.0 + i, data={}) for i in range(3)]
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    if request.param == "memory":
        opened: TraceStore = MemoryTraceStore()
    elif request.param == "sqlite":
        opened = SqliteTraceStore(tmp_path / "t.db")
    else:
        from actionspace.trace.postgres import PostgresTraceStore
        from tests.pg import fresh_schema

        schema = fresh_schema(request.getfixturevalue("pg_url"))
        opened = PostgresTraceStore(next(schema))
        request.addfinalizer(lambda: [None for _ in schema])
    _fill(opened)
    yield opened
    opened.close()


@pytest.mark.parametrize("limit", REFUSED, ids=repr)
def test_every_store_refuses_a_limit_that_is_not_a_positive_int_with_one_value_error(
    any_store: TraceStore, limit: Any
) -> None:
    with pytest.raises(ValueError, match=MESSAGE):
        any_store.runs(limit=limit)
    with pytest.raises(ValueError, match=MESSAGE):
        any_store.runs(limit=limit, since=0.0)


@pytest.mark.parametrize("limit", [1, 2, 3, 2**62, 2**63, 2**80], ids=repr)
def test_every_store_lists_the_same_latest_runs_for_a_positive_limit(
    any_store: TraceStore, limit: int
) -> None:
    listed = [s.run_id for s in any_store.runs(limit=limit)]
    assert listed == ["r2", "r1", "r0"][: min(limit, 3)]


@settings(max_examples=60, deadline=None)
@given(limit=st.integers(-(2**80), 2**80))
def test_memory_and_sqlite_answer_any_int_limit_alike(
    tmp_path_factory: pytest.TempPathFactory, limit: int
) -> None:
    stores: list[TraceStore] = [MemoryTraceStore(), SqliteTraceStore(tmp_path_factory.mktemp("lim") / "t.db")]
    answers: list[list[str] | str] = []
    for store in stores:
        _fill(store)
        try:
            answers.append([s.run_id for s in store.runs(limit=limit)])
        except ValueError as exc:
            answers.append(str(exc))
        finally:
            store.close()
    assert answers[0] == answers[1]
    assert isinstance(answers[0], str) == (limit < 1)


def test_trace_list_still_answers_a_bad_limit_with_its_usage_error(tmp_path: Path) -> None:
    store = SqliteTraceStore(tmp_path / "t.db")
    _fill(store)
    store.close()
    said = CliRunner().invoke(trace_app, ["list", "--store", f"sqlite:///{tmp_path / 't.db'}", "-n", "-1"])
    assert said.exit_code == 2 and "Traceback" not in said.output
    ok = CliRunner().invoke(
        trace_app, ["list", "--store", f"sqlite:///{tmp_path / 't.db'}", "-n", "2", "--json"]
    )
    assert ok.exit_code == 0 and "r2" in ok.stdout and "r0" not in ok.stdout
