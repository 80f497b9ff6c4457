"""Python tools the gateway tests serve: a small ticket desk whose state is a real SQLite file.

The file is named by the ``GATEWAY_DESK_DB`` environment variable, so a test can read, from its
own process, exactly what the gateway's process did to the world (how many tickets and refunds
were really written), independently of what the gateway reports.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from typing import Annotated

from pydantic import Field

from actionspace import tool

DB_ENV = "GATEWAY_DESK_DB"


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(os.environ[DB_ENV], timeout=10)
    conn.execute("CREATE TABLE IF NOT EXISTS tickets (id INTEGER PRIMARY KEY, customer TEXT, title TEXT)")
    conn.execute("CREATE TABLE IF NOT EXISTS refunds (id INTEGER PRIMARY KEY, customer TEXT, cents INTEGER)")
    return conn


def count(table: str, path: str) -> int:
    """Rows in ``table`` of the desk at ``path`` (for assertions)."""
    with sqlite3.connect(path) as conn:
        try:
            row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        except sqlite3.OperationalError:
            return 0
    return int(row[0])


@tool(effect="read")
def lookup_customer(customer_id: Annotated[str, Field(pattern=r"^c\d+$")]) -> dict[str, str]:
    """Look up a customer by id.

    Args:
        customer_id: The customer's id, like c42.
    """
    return {"customer_id": customer_id, "name": f"Customer {customer_id[1:]}", "tier": "gold"}


@tool(effect="write", writes=["tickets:{customer_id}"])
def create_ticket(
    customer_id: Annotated[str, Field(pattern=r"^c\d+$")],
    title: Annotated[str, Field(min_length=3, max_length=80)],
) -> dict[str, int]:
    """Open a support ticket for a customer.

    Args:
        customer_id: The customer's id, like c42.
        title: What the ticket is about.
    """
    with _db() as conn:
        cur = conn.execute("INSERT INTO tickets (customer, title) VALUES (?, ?)", (customer_id, title))
    return {"ticket_id": int(cur.lastrowid or 0)}


@tool(effect="external", writes=["payments:{customer_id}"])
def send_refund(
    customer_id: Annotated[str, Field(pattern=r"^c\d+$")], cents: Annotated[int, Field(gt=0)]
) -> dict[str, int]:
    """Refund money to a customer's card.

    Args:
        customer_id: The customer's id, like c42.
        cents: Amount in cents.
    """
    with _db() as conn:
        cur = conn.execute("INSERT INTO refunds (customer, cents) VALUES (?, ?)", (customer_id, cents))
    return {"refund_id": int(cur.lastrowid or 0)}


@tool(effect="write")
def purge_desk() -> str:
    """Delete every ticket (administrators only)."""
    with _db() as conn:
        conn.execute("DELETE FROM tickets")
    return "purged"


DESK = [lookup_customer, create_ticket, send_refund, purge_desk]

FIFO_ENV = "GATEWAY_DESK_FIFO"


@tool(effect="write", writes=["tickets:{customer_id}"])
def open_ticket_then_hang(customer_id: str, title: str) -> dict[str, int]:
    """Open a ticket, say so on the FIFO named by GATEWAY_DESK_FIFO, then never answer.

    Args:
        customer_id: The customer's id.
        title: What the ticket is about.
    """
    with _db() as conn:
        conn.execute("INSERT INTO tickets (customer, title) VALUES (?, ?)", (customer_id, title))
    with open(os.environ[FIFO_ENV], "w") as fifo:  # blocks until the test listens
        fifo.write("committed\n")
    threading.Event().wait()  # the test kills the gateway now: the answer is lost
    return {"ticket_id": -1}


CRASHY = [open_ticket_then_hang]
