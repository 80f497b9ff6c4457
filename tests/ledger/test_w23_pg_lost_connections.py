"""PostgreSQL ledger connections the server ends: sessions ended while idle in the pool (a restart,
a failover, ``pg_terminate_backend``), and a session ended under a transition's statement, before
it ran or after it landed. The store answers as if nothing happened: it never hands out an ended
session, and a transition asked again on a new connection tells its own landed write from another
writer's."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from actionspace.ledger.postgres import PostgresLedgerStore
from tests.ledger.factories import entry
from tests.pg import fresh_schema


@pytest.fixture
def url(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def _end_sessions_but_this(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as pg:
        rows = pg.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def _dispatched(store: PostgresLedgerStore, node: str) -> Any:
    first = entry(node).evolve(state="dispatched", attempts=1)
    assert store.begin(first).created
    return first


def test_sessions_the_server_ended_in_the_pool_are_never_handed_out(url: str) -> None:
    with PostgresLedgerStore(url) as store:
        entries = [_dispatched(store, f"n{i}") for i in range(4)]
        assert _end_sessions_but_this(url) >= 1
        for e in entries:  # each takes a connection of the pool: every one of them was ended
            moved = store.transition(
                e.key, ("dispatched",), e.evolve(state="committed", updated_at=e.updated_at + 1)
            )
            assert moved is not None and moved.state == "committed"
        assert [x.state for x in store.list()] == ["committed"] * 4


def test_a_transition_whose_session_ends_under_its_statement_is_stored_on_a_new_connection(url: str) -> None:
    with PostgresLedgerStore(url) as store:
        first = _dispatched(store, "n1")
        with psycopg.connect(url, autocommit=True) as pg:  # the statement's own session ends inside it
            pg.execute("CREATE SEQUENCE cut_once")
            pg.execute(
                "CREATE FUNCTION cut_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                " IF NEW.state = 'committed' AND nextval('cut_once') = 1 THEN"
                " PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); END IF;"
                " RETURN NEW; END $$"
            )
            pg.execute(
                "CREATE TRIGGER cut_once BEFORE UPDATE ON ledger_entries"
                " FOR EACH ROW EXECUTE FUNCTION cut_once()"
            )
        done = first.evolve(state="committed", updated_at=first.updated_at + 1, remote_id="r-1")
        moved = store.transition(first.key, ("dispatched",), done)
        assert moved is not None and moved.state == "committed"
        stored = store.get(first.key)
        assert stored is not None and (stored.state, stored.remote_id) == ("committed", "r-1")


def _answer_lost_once(store: PostgresLedgerStore) -> list[str]:
    """Make the next statement of ``store`` land, then end its session before its answer is read."""
    connection = store._db.connection
    said: list[str] = []

    class AnswerLost:
        def __init__(self, conn: Any) -> None:
            self.conn = conn

        def execute(self, sql: Any, params: Any = None) -> Any:
            done = self.conn.execute(sql, params)
            if not said:
                said.append(str(sql))
                self.conn.execute("SELECT pg_terminate_backend(pg_backend_pid()); SELECT pg_sleep(5)")
            return done

        def __getattr__(self, name: str) -> Any:
            return getattr(self.conn, name)

    @contextmanager
    def lost_once() -> Iterator[Any]:
        with connection() as conn:
            yield conn if said else AnswerLost(conn)

    store._db.connection = lost_once  # type: ignore[method-assign]
    return said


@pytest.mark.parametrize("how", ["transition", "transition_at"])
def test_a_transition_that_landed_before_its_answer_was_lost_is_known_as_its_own(url: str, how: str) -> None:
    with PostgresLedgerStore(url) as store:
        first = _dispatched(store, "n1")
        said = _answer_lost_once(store)
        done = first.evolve(state="committed", updated_at=first.updated_at + 1, remote_id="r-1")
        if how == "transition":
            moved = store.transition(first.key, ("dispatched",), done)
        else:
            moved = store.transition_at(first.key, "dispatched", 1, done)
        assert said and "UPDATE ledger_entries" in said[0]
        assert moved is not None and (moved.state, moved.remote_id) == ("committed", "r-1")


def test_a_transition_asked_again_after_another_writer_moved_the_entry_is_refused(url: str) -> None:
    with PostgresLedgerStore(url) as store:
        first = _dispatched(store, "n1")
        other = first.evolve(state="committed", updated_at=first.updated_at + 5, remote_id="theirs")
        assert store.transition(first.key, ("dispatched",), other) is not None
        said = _answer_lost_once(store)  # this statement finds the entry moved: its answer is lost
        mine = first.evolve(state="committed", updated_at=first.updated_at + 1, remote_id="mine")
        assert store.transition(first.key, ("dispatched",), mine) is None
        assert said
        stored = store.get(first.key)
        assert stored is not None and stored.remote_id == "theirs"


def test_an_intent_that_landed_before_its_answer_was_lost_is_begun_as_its_own(url: str) -> None:
    """Else the call answers ``transient`` (nothing sent), and its entry, ``dispatched`` with no
    sender, makes every later proposal ``unknown_commit``: a person asked about a send never made."""
    with PostgresLedgerStore(url) as store:
        said = _answer_lost_once(store)
        intent = entry("n1").evolve(state="dispatched", attempts=1)
        begun = store.begin(intent)
        assert said and "INSERT INTO ledger_entries" in said[0]
        assert begun.created and begun.entry.key == intent.key
        assert [(e.key, e.state) for e in store.list()] == [(intent.key, "dispatched")]


def test_an_intent_asked_again_after_another_writer_began_the_node_is_theirs(url: str) -> None:
    with PostgresLedgerStore(url) as store:
        theirs = entry("n1").evolve(state="dispatched", attempts=1)
        assert store.begin(theirs).created
        said = _answer_lost_once(store)
        mine = theirs.evolve(created_at=theirs.created_at + 1, updated_at=theirs.updated_at + 1)
        begun = store.begin(mine)
        assert said
        assert not begun.created and begun.entry.created_at == theirs.created_at
