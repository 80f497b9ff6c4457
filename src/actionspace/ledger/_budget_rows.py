"""The rows of ``budget_reservations`` (see :mod:`actionspace.ledger.budget_store`): one per open
reservation, naming its owner, its usage rows, the ledger key it was admitted under, what it
counts in those rows and what it is charged should its owner die once that key was sent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from actionspace.ledger._budget_reclaim import values
from actionspace.policy.budget import UNITS

__all__ = ["insert_row", "lower_row", "take_row"]

Vector = tuple[float, float, float, float]


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
        (token, owner, *keys, key, *need, *sent),
    )


def lower_row(conn: Any, p: str, token: str, by: Sequence[float], if_sent: Sequence[float] | None) -> None:
    """Lower what row ``token`` counts by ``by`` (raise it, when negative); its charge if sent
    becomes ``if_sent`` when given."""
    sent = "".join(f", sent_{unit} = {p}" for unit in UNITS) if if_sent is not None else ""
    conn.execute(
        f"UPDATE budget_reservations SET calls = calls - {p}, items = items - {p},"
        f" bytes = bytes - {p}, money = money - {p}{sent} WHERE token = {p}",
        (*by, *(if_sent or ()), token),
    )


def take_row(conn: Any, p: str, token: str) -> Vector:
    """What the usage rows hold for reservation ``token``, its row deleted; none when it is gone
    (reclaimed long ago: then all of the actual usage is charged, erring on spent)."""
    row = conn.execute(
        f"SELECT calls, items, bytes, money FROM budget_reservations WHERE token = {p}", (token,)
    ).fetchone()
    if row is None:
        return (0, 0, 0, 0.0)
    conn.execute(f"DELETE FROM budget_reservations WHERE token = {p}", (token,))
    calls, items, nbytes, money = (float(v) for v in values(row))
    return (calls, items, nbytes, money)
