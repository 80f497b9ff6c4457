"""Reclaiming the budget reservations of owners that are provably gone (see
:mod:`actionspace.ledger.budget_store`): each open reservation of such an owner is charged at
what the ledger says happened to its key, and its owner's registration is dropped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actionspace.ledger import budget_owners as owners
from actionspace.ledger.budget_owners import NOT_SENT, RETENTION_S

__all__ = ["FORGOTTEN", "reclaim_gone", "values"]

Vector = tuple[float, float, float, float]
FORGOTTEN = ""
"""The ``run_scope`` of a reservation whose run's usage row was dropped (no run key is empty):
its settle and its reclaim change only its principal's row."""
Add = Callable[[Any, str, Vector], None]
"""``add(conn, scope, delta)``: add ``delta`` to a usage row."""
LedgerState = Callable[[Any, str], "str | None"]
"""``ledger_state(conn, key)``: the ledger's state of ``key``; raises when the store has no ledger."""


def values(row: Any) -> list[Any]:
    """A database row's values, whether the driver gives a tuple or a dict."""
    return list(row.values()) if isinstance(row, dict) else list(row)


def reclaim_gone(
    conn: Any, *, p: str, now_sql: str, me: str, host: str, add: Add, ledger_state: LedgerState
) -> int:
    """Settle the open reservations of every owner but ``me`` that is gone; how many.

    On ``host`` an owner is gone when its process (pid and start time) no longer runs: its rows
    are deleted once charged. From another host, only a lapsed lease says so: its rows are kept,
    marked reclaimed, should it only have stalled and settle later. ``p`` is the SQL placeholder,
    ``now_sql`` the database's clock in seconds since the epoch."""
    now = float(values(conn.execute(f"SELECT {now_sql}").fetchone())[0])
    registered = conn.execute(
        f"SELECT owner, host, pid, started, expires FROM budget_owners WHERE owner <> {p}", (me,)
    ).fetchall()
    count = 0
    for owner, its_host, pid, started, expires in map(values, registered):
        if its_host and its_host == host:
            if started and owners.started_of(int(pid)) == started:
                continue  # its process runs: never reclaimed, however slow or late its lease
            dead = True
        elif float(expires) < now:
            dead = False  # only its lease lapsed: keep its rows, should it settle later
        else:
            continue
        count += _reclaim_owner(conn, p, owner, now if not dead else None, add, ledger_state)
        conn.execute(f"DELETE FROM budget_owners WHERE owner = {p}", (owner,))
    conn.execute(
        f"DELETE FROM budget_reservations WHERE reclaimed IS NOT NULL AND reclaimed < {p}",
        (now - RETENTION_S,),
    )
    return count


def _reclaim_owner(
    conn: Any, p: str, owner: str, stamp: float | None, add: Add, ledger_state: LedgerState
) -> int:
    """Charge each open reservation of ``owner`` at what the ledger says; ``stamp``: keep the
    rows (marked reclaimed then), else delete them (their process is gone for good)."""
    rows = conn.execute(
        "SELECT token, run_scope, principal_scope, ledger_key, calls, items, bytes, money,"
        " sent_calls, sent_items, sent_bytes, sent_money FROM budget_reservations"
        f" WHERE owner = {p} AND reclaimed IS NULL",
        (owner,),
    ).fetchall()
    for token, run_scope, principal_scope, key, *numbers in map(values, rows):
        counted, sent = [float(v) for v in numbers[:4]], [float(v) for v in numbers[4:]]
        charged = sent if key is None or _sent(conn, key, ledger_state) else [0, 0, 0, 0.0]
        c0, c1, c2, c3 = (charged[i] - counted[i] for i in range(4))
        delta = (c0, c1, c2, c3)
        if any(delta):
            if run_scope != FORGOTTEN:
                add(conn, run_scope, delta)
            add(conn, principal_scope, delta)
        if stamp is None:
            conn.execute(f"DELETE FROM budget_reservations WHERE token = {p}", (token,))
        else:
            conn.execute(
                f"UPDATE budget_reservations SET calls = {p}, items = {p}, bytes = {p}, money = {p},"
                f" reclaimed = {p} WHERE token = {p}",
                (*charged, stamp, token),
            )
    return len(rows)


def _sent(conn: Any, key: str, ledger_state: LedgerState) -> bool:
    """Whether the ledger may have dispatched ``key`` (True when it cannot tell)."""
    try:
        state = ledger_state(conn, key)
    except Exception:
        return True
    return state is not None and state not in NOT_SENT
