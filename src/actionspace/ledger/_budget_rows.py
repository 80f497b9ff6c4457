"""The rows of a meter kept in a store (see :mod:`actionspace.ledger.budget_store`): in
``budget_usage`` one per run and per principal, what it used and holds; in ``budget_reservations``
one per open reservation, naming its owner, its usage rows, the ledger key it was admitted under,
what it counts in those rows and what it is charged should its owner die once that key was sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from actionspace.ledger._budget_reclaim import FORGOTTEN, values
from actionspace.ledger.budget_owners import OWNER_TABLES
from actionspace.policy._budget_limits import UNITS
from actionspace.policy._budget_usage import Usage, vector

__all__ = [
    "PG_USAGE_TABLES",
    "SQLITE_SCHEMA",
    "add_usage",
    "counts_in_run",
    "forget_run",
    "in_run",
    "in_run_args",
    "insert_row",
    "legacy_run_key",
    "lower_row",
    "principal_key",
    "run_key",
    "run_prefix",
    "run_usage",
    "settle_rows",
    "take_row",
    "usage_row",
    "whole_run_usage",
]

Vector = tuple[float, float, float, float]
SQLITE_SCHEMA: Final = (
    """
CREATE TABLE IF NOT EXISTS budget_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS budget_usage (
    scope TEXT PRIMARY KEY,
    calls REAL NOT NULL,
    items REAL NOT NULL,
    bytes REAL NOT NULL,
    money REAL NOT NULL
);
"""
    + OWNER_TABLES
)

PG_USAGE_TABLES: Final = (
    "CREATE TABLE IF NOT EXISTS budget_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS budget_usage (scope TEXT PRIMARY KEY,"
    " calls DOUBLE PRECISION NOT NULL, items DOUBLE PRECISION NOT NULL,"
    " bytes DOUBLE PRECISION NOT NULL, money DOUBLE PRECISION NOT NULL)",
    # the key in byte order, whatever the database's collation: a run's rows are a range of it
    # (:func:`in_run`); created on opening a store made before it, as every statement here is
    'CREATE INDEX IF NOT EXISTS budget_usage_scope_bytes ON budget_usage (scope COLLATE "C")',
)
"""PostgreSQL's statements (SQLite's key is in byte order already: its primary key serves)."""


def run_key(run_id: str, principal: tuple[str, str | None]) -> str:
    """The ``budget_usage`` scope of a principal's run: ``run@{run id}:{principal's scope}``, the
    run id with ``%`` and ``:`` percent-escaped (so the first ``:`` after it ends it). A run's
    usage is kept per principal: one naming another's run id never spends that run's budget."""
    return f"{run_prefix(run_id)}{principal_key(principal)}"


def run_prefix(run_id: str) -> str:
    """What the scope of every principal's usage in ``run_id`` starts with (and no other's does)."""
    return f"run@{run_id.replace('%', '%25').replace(':', '%3A')}:"


def legacy_run_key(run_id: str) -> str:
    """The scope under which earlier versions kept a run's usage, of every principal in it. Such
    a row (of a store written before) still counts, for every principal of the run: whose part of
    it was whose is not recorded, and a budget errs on the side of spent. Nothing writes one now
    (no new scope starts with ``run:``), but a reclaim settles what a reservation made then
    counts in it."""
    return f"run:{run_id}"


def principal_key(principal: tuple[str, str | None]) -> str:
    """``principal:{tenant}:{id}``, the tenant with ``%`` and ``:`` percent-escaped (so the first
    ``:`` after it ends it) and None spelled empty; the empty tenant, another tenant than None
    (as for the meter in memory and for what a tenant may see), is spelled ``%``, which no
    escaped tenant is. Every other tenant without ``%`` or ``:`` keeps the spelling it always had.
    """
    pid, tenant = principal
    if tenant is None:
        return f"principal::{pid}"
    escaped = tenant.replace("%", "%25").replace(":", "%3A") if tenant else "%"
    return f"principal:{escaped}:{pid}"


def usage_row(conn: Any, p: str, scope: str, lock_sql: str = "") -> list[float]:
    """What ``scope`` used and holds (zero without a row); ``lock_sql`` appended to the read."""
    sql = f"SELECT calls, items, bytes, money FROM budget_usage WHERE scope = {p}"
    row = conn.execute(sql + lock_sql, (scope,)).fetchone()
    if row is None:
        return [0, 0, 0, 0.0]
    return [float(v) for v in values(row)]


def run_usage(
    conn: Any, p: str, run_id: str, principal: tuple[str, str | None], lock_sql: str = ""
) -> list[float]:
    """What ``principal`` used and holds in ``run_id``, what earlier versions kept of the run
    under :func:`legacy_run_key` included; ``lock_sql`` appended to the read."""
    sql = f"SELECT calls, items, bytes, money FROM budget_usage WHERE scope IN ({p}, {p})"
    rows = conn.execute(sql + lock_sql, (run_key(run_id, principal), legacy_run_key(run_id))).fetchall()
    return _summed(rows)


def whole_run_usage(conn: Any, p: str, run_id: str, collate: str = "") -> list[float]:
    """What every principal used and holds in ``run_id``: the rows under its legacy key and its
    prefix, read over the key's index (:func:`in_run`)."""
    rows = conn.execute(
        f"SELECT calls, items, bytes, money FROM budget_usage WHERE {in_run('scope', p, collate)}",
        in_run_args(run_id),
    ).fetchall()
    return _summed(rows)


def in_run(column: str, p: str, collate: str = "") -> str:
    """SQL true for the usage scopes of every principal in a run: its legacy key (bound first),
    or any scope from its :func:`run_prefix` (bound second) up to, not including, that prefix
    with its final ``:`` raised to ``;`` (bound third). In byte order (SQLite's ``BINARY``,
    PostgreSQL's ``"C"``, given as ``collate``) those are exactly the scopes that start with the
    prefix, and an index on ``column`` in that order finds them without reading any other row
    (a test of the prefix with ``substr`` read every row of the table)."""
    return f"({column} = {p} OR ({column}{collate} >= {p} AND {column}{collate} < {p}))"


def in_run_args(run_id: str) -> tuple[str, str, str]:
    """The values :func:`in_run` binds for ``run_id``."""
    prefix = run_prefix(run_id)
    return legacy_run_key(run_id), prefix, f"{prefix[:-1]};"


def _summed(rows: Sequence[Any]) -> list[float]:
    total = [0.0, 0.0, 0.0, 0.0]
    for row in rows:
        for i, v in enumerate(values(row)):
            total[i] += float(v)
    return total


def add_usage(conn: Any, p: str, scope: str, delta: Vector) -> None:
    """Add ``delta`` to the usage row of ``scope`` (created at ``delta`` when missing)."""
    conn.execute(
        f"INSERT INTO budget_usage (scope, calls, items, bytes, money) VALUES ({p}, {p}, {p}, {p}, {p})"
        " ON CONFLICT (scope) DO UPDATE SET calls = budget_usage.calls + excluded.calls,"
        " items = budget_usage.items + excluded.items, bytes = budget_usage.bytes + excluded.bytes,"
        " money = budget_usage.money + excluded.money",
        (scope, *_reals(delta)),
    )


def insert_row(
    conn: Any,
    p: str,
    token: str,
    owner: str,
    keys: tuple[str, str],
    key: str | None,
    need: Vector,
    sent: Vector,
) -> None:
    """Record reservation ``token`` of ``owner``: counted ``need`` in the rows ``keys`` (run,
    principal), charged ``sent`` should its owner die once ``key`` was sent. ``p``: the placeholder."""
    marks = ", ".join([p] * 13)
    conn.execute(
        "INSERT INTO budget_reservations (token, owner, run_scope, principal_scope, ledger_key,"
        " calls, items, bytes, money, sent_calls, sent_items, sent_bytes, sent_money)"
        f" VALUES ({marks})",
        (token, owner, *keys, key, *_reals(need), *_reals(sent)),
    )


def lower_row(conn: Any, p: str, token: str, by: Sequence[float], if_sent: Sequence[float] | None) -> None:
    """Lower what row ``token`` counts by ``by`` (raise it, when negative); its charge if sent
    becomes ``if_sent`` when given."""
    sent = "".join(f", sent_{unit} = {p}" for unit in UNITS) if if_sent is not None else ""
    conn.execute(
        f"UPDATE budget_reservations SET calls = calls - {p}, items = items - {p},"
        f" bytes = bytes - {p}, money = money - {p}{sent} WHERE token = {p}",
        (*_reals(by), *_reals(if_sent or ()), token),
    )


def _reals(counts: Sequence[float]) -> tuple[float, ...]:
    """``counts`` as floats, as the columns hold them: a driver binds an integer of 2**63 or more
    as no SQL integer (SQLite refuses it), while every count a meter adds is a finite float or
    infinite (:func:`~actionspace.policy.budget._vector`)."""
    return tuple(map(float, counts))


def take_row(conn: Any, p: str, token: str) -> tuple[Vector, bool] | None:
    """What the usage rows hold for reservation ``token`` and whether its run's row still counts
    it (not once :func:`forget_run` dropped that row), its row deleted; None when it is gone.

    The row is deleted by one statement, so of every process holding a copy of the reservation
    (a child forked while it was open, say) exactly one takes it, whatever their order. Gone means
    settled already, or reclaimed from an owner that died (or, past the retention, from one that
    stalled): the first settlement, or the reclaim, stands."""
    rows = conn.execute(
        f"DELETE FROM budget_reservations WHERE token = {p} RETURNING calls, items, bytes, money, run_scope",
        (token,),
    ).fetchall()  # a RETURNING statement runs to its end
    if not rows:
        return None
    calls, items, nbytes, money, run_scope = values(rows[0])
    return (float(calls), float(items), float(nbytes), float(money)), run_scope != FORGOTTEN


def forget_run(conn: Any, p: str, run_id: str, collate: str = "") -> None:
    """Drop a run's usage rows, of every principal (found over the key's index, :func:`in_run`);
    its open reservations no longer count in them (their settle and their reclaim change only
    their principal's row), so that no such row comes back below zero."""
    conn.execute(f"DELETE FROM budget_usage WHERE {in_run('scope', p, collate)}", in_run_args(run_id))
    conn.execute(
        f"UPDATE budget_reservations SET run_scope = {p} WHERE {in_run('run_scope', p, collate)}",
        (FORGOTTEN, *in_run_args(run_id)),
    )


def counts_in_run(conn: Any, p: str, token: str) -> bool:
    """Whether reservation ``token`` is open and its run's usage row still counts it."""
    row = conn.execute(f"SELECT run_scope FROM budget_reservations WHERE token = {p}", (token,)).fetchone()
    return row is not None and values(row)[0] != FORGOTTEN


def settle_rows(
    conn: Any, p: str, token: str | None, keys: tuple[str, str], amount: Usage, actual: Usage
) -> bool:
    """Replace the reservation ``token`` (None: none recorded, it counts ``amount``) by ``actual``
    in its usage rows ``keys`` (run, principal), its run's row left alone once forgotten; False,
    changing nothing, when its row is gone (:func:`take_row`: it was settled or reclaimed)."""
    counted, scopes = vector(amount), tuple[str, ...](keys)
    if token is not None:
        taken = take_row(conn, p, token)
        if taken is None:
            return False
        counted = taken[0]
        if not taken[1]:
            scopes = keys[1:]
    used = vector(actual)
    delta = (used[0] - counted[0], used[1] - counted[1], used[2] - counted[2], used[3] - counted[3])
    if any(delta):
        for scope in scopes:
            add_usage(conn, p, scope, delta)
    return True
