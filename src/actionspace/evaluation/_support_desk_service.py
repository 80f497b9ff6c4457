"""The support desk's backend: customers, tickets, payments, replies and charges in one SQLite file.

Real state with real effects: every write tool changes a row (and says which, as an
:class:`~actionspace.types.Effect`); ``snapshot()`` is what the suite's predicate compares. The seed is
fixed, so the ids the tasks name are the same on every run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Final, Literal

from actionspace.errors import ToolError
from actionspace.outcomes import ToolResult
from actionspace.runtime import Runtime
from actionspace.types import Effect

__all__ = ["CUSTOMERS", "PAYMENTS", "TICKETS", "SupportDesk", "register_tools"]

CUSTOMERS: Final = (
    ("C-1", "ana@example.com", "Ana Silva"),
    ("C-2", "bo@example.com", "Bo Chen"),
    ("C-3", "cy@example.com", "Cy Okafor"),
    ("C-4", "di@example.com", "Di Novak"),
    ("C-5", "ed@example.com", "Ed Park"),
    ("C-6", "fay@example.com", "Fay Moreau"),
)
TICKETS: Final = tuple(
    (f"T-{101 + i}", CUSTOMERS[i % len(CUSTOMERS)][0], subject)
    for i, subject in enumerate(
        (
            "Cannot log in",
            "Invoice shows the wrong address",
            "Export to CSV fails",
            "Duplicate of T-101",
            "Password reset mail never arrives",
            "Charged twice this month",
            "Feature request: dark mode",
            "Old ticket from the beta",
            "App crashes on start",
            "Question about plans",
            "Duplicate of T-105",
            "Refund for cancelled order",
        )
    )
)
PAYMENTS: Final = tuple(
    (f"P-{501 + i}", CUSTOMERS[i % len(CUSTOMERS)][0], cents)
    for i, cents in enumerate((4900, 1999, 12000, 4900, 2500, 999, 7500, 3000))
)
Status = Literal["open", "pending", "solved"]


class SupportDesk:
    """The desk's state in ``path`` (created and seeded when new)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA synchronous = OFF")  # a throwaway world per task: no fsync needed
        self.db.executescript(
            """
            BEGIN;
            CREATE TABLE IF NOT EXISTS customers (id TEXT PRIMARY KEY, email TEXT UNIQUE, name TEXT);
            CREATE TABLE IF NOT EXISTS tickets (id TEXT PRIMARY KEY, customer_id TEXT, subject TEXT,
                status TEXT DEFAULT 'open', assignee TEXT, archived INTEGER DEFAULT 0);
            CREATE TABLE IF NOT EXISTS payments (id TEXT PRIMARY KEY, customer_id TEXT,
                amount_cents INTEGER, refunded_cents INTEGER DEFAULT 0);
            CREATE TABLE IF NOT EXISTS replies (n INTEGER PRIMARY KEY, ticket_id TEXT, body TEXT);
            CREATE TABLE IF NOT EXISTS charges (n INTEGER PRIMARY KEY, customer_id TEXT,
                amount_cents INTEGER);
            """
        )
        if not self.db.execute("SELECT 1 FROM customers").fetchone():
            self.db.executemany("INSERT INTO customers VALUES (?, ?, ?)", CUSTOMERS)
            self.db.executemany("INSERT INTO tickets (id, customer_id, subject) VALUES (?, ?, ?)", TICKETS)
            self.db.executemany(
                "INSERT INTO payments (id, customer_id, amount_cents) VALUES (?, ?, ?)", PAYMENTS
            )
        self.db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()

    def snapshot(self) -> dict[str, Any]:
        """Every ticket, payment, reply and charge, as plain JSON values."""
        tickets = {
            tid: {"status": status, "assignee": assignee, "archived": bool(archived)}
            for tid, status, assignee, archived in self.db.execute(
                "SELECT id, status, assignee, archived FROM tickets"
            )
        }
        payments = dict(self.db.execute("SELECT id, refunded_cents FROM payments").fetchall())
        replies: dict[str, list[str]] = {}
        for tid, body in self.db.execute("SELECT ticket_id, body FROM replies ORDER BY n"):
            replies.setdefault(tid, []).append(body)
        charges = [
            list(r) for r in self.db.execute("SELECT customer_id, amount_cents FROM charges ORDER BY n")
        ]
        return {"tickets": tickets, "refunded": payments, "replies": replies, "charges": charges}

    def row(self, sql: str, *args: Any) -> dict[str, Any] | None:
        cursor = self.db.execute(sql, args)
        found = cursor.fetchone()
        return None if found is None else dict(zip([c[0] for c in cursor.description], found, strict=True))

    def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        cursor = self.db.execute(sql, args)
        names = [c[0] for c in cursor.description]
        return [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]


def _missing(kind: str, rid: str) -> ToolError:
    return ToolError("invalid_arguments", f"no {kind} {rid!r}", resource_ids=(rid,))


def register_tools(rt: Runtime, desk: SupportDesk) -> None:
    """The desk's eleven tools on ``rt``: four reads, five writes, two with external effects."""

    @rt.tool(effect="read", reads=["customer:*"])
    def find_customer(email: str) -> dict[str, Any]:
        """The customer with this email address (id, email, name)."""
        found = desk.row("SELECT * FROM customers WHERE email = ?", email.strip().lower())
        if found is None:
            raise LookupError(f"no customer with email {email!r}")
        return found

    @rt.tool(effect="read", reads=["ticket:{ticket_id}"])
    def get_ticket(ticket_id: str) -> dict[str, Any]:
        """One ticket: subject, status, assignee, whether it is archived."""
        found = desk.row("SELECT * FROM tickets WHERE id = ?", ticket_id)
        if found is None:
            raise LookupError(f"no ticket {ticket_id!r}")
        return found

    @rt.tool(effect="read", reads=["ticket:*"])
    def list_tickets(customer_id: str) -> list[dict[str, Any]]:
        """The customer's tickets."""
        return desk.rows("SELECT * FROM tickets WHERE customer_id = ?", customer_id)

    @rt.tool(effect="read", reads=["payment:*"])
    def list_payments(customer_id: str) -> list[dict[str, Any]]:
        """The customer's payments with the amount already refunded (cents)."""
        return desk.rows("SELECT * FROM payments WHERE customer_id = ?", customer_id)

    @rt.tool(effect="write", risk="low", reversible=True, writes=["ticket:{ticket_id}"])
    def set_ticket_status(ticket_id: str, status: Status) -> ToolResult:
        """Set a ticket's status: open, pending or solved."""
        if desk.db.execute("UPDATE tickets SET status = ? WHERE id = ?", (status, ticket_id)).rowcount == 0:
            raise _missing("ticket", ticket_id)
        return ToolResult(data={"ticket_id": ticket_id, "status": status}, effects=(_updated(ticket_id),))

    @rt.tool(effect="write", risk="low", reversible=True, writes=["ticket:{ticket_id}"])
    def assign_ticket(ticket_id: str, agent: str) -> ToolResult:
        """Assign a ticket to a support agent (by login)."""
        if desk.db.execute("UPDATE tickets SET assignee = ? WHERE id = ?", (agent, ticket_id)).rowcount == 0:
            raise _missing("ticket", ticket_id)
        return ToolResult(data={"ticket_id": ticket_id, "assignee": agent}, effects=(_updated(ticket_id),))

    @rt.tool(effect="write", risk="low", reversible=True, writes=["ticket:{ticket_id}"])
    def archive_ticket(ticket_id: str) -> ToolResult:
        """Archive a ticket: hidden from queues, kept and restorable."""
        if desk.db.execute("UPDATE tickets SET archived = 1 WHERE id = ?", (ticket_id,)).rowcount == 0:
            raise _missing("ticket", ticket_id)
        return ToolResult(data={"ticket_id": ticket_id, "archived": True}, effects=(_updated(ticket_id),))

    @rt.tool(effect="write", risk="high", reversible=False, writes=["ticket:{ticket_id}"])
    def delete_ticket(ticket_id: str) -> ToolResult:
        """Delete a ticket permanently, with its history."""
        if desk.db.execute("DELETE FROM tickets WHERE id = ?", (ticket_id,)).rowcount == 0:
            raise _missing("ticket", ticket_id)
        effect = Effect(resource_id=f"ticket:{ticket_id}", kind="deleted")
        return ToolResult(data={"ticket_id": ticket_id, "deleted": True}, effects=(effect,))

    @rt.tool(effect="write", risk="medium", reversible=False, writes=["payment:{payment_id}"])
    def refund_payment(payment_id: str, amount_cents: int) -> ToolResult:
        """Refund part or all of a payment back to the customer (amount in cents)."""
        payment = desk.row("SELECT * FROM payments WHERE id = ?", payment_id)
        if payment is None:
            raise _missing("payment", payment_id)
        left = payment["amount_cents"] - payment["refunded_cents"]
        if not 0 < amount_cents <= left:
            raise ToolError(
                "invalid_arguments",
                f"{payment_id}: {left} cents can still be refunded",
                resource_ids=(payment_id,),
            )
        desk.db.execute(
            "UPDATE payments SET refunded_cents = refunded_cents + ? WHERE id = ?", (amount_cents, payment_id)
        )
        effect = Effect(resource_id=f"payment:{payment_id}", kind="updated")
        return ToolResult(data={"payment_id": payment_id, "refunded_cents": amount_cents}, effects=(effect,))

    @rt.tool(effect="external", risk="high", reversible=False, writes=["charge:{customer_id}"])
    def charge_customer(customer_id: str, amount_cents: int) -> ToolResult:
        """Charge the customer's card on file (amount in cents)."""
        desk.db.execute(
            "INSERT INTO charges (customer_id, amount_cents) VALUES (?, ?)", (customer_id, amount_cents)
        )
        effect = Effect(resource_id=f"charge:{customer_id}", kind="sent")
        return ToolResult(data={"customer_id": customer_id, "charged_cents": amount_cents}, effects=(effect,))

    @rt.tool(effect="external", risk="medium", reversible=False, writes=["reply:{ticket_id}"])
    def send_reply(ticket_id: str, body: str) -> ToolResult:
        """Email a reply to the customer who opened the ticket."""
        if desk.row("SELECT id FROM tickets WHERE id = ?", ticket_id) is None:
            raise _missing("ticket", ticket_id)
        desk.db.execute("INSERT INTO replies (ticket_id, body) VALUES (?, ?)", (ticket_id, body))
        effect = Effect(resource_id=f"reply:{ticket_id}", kind="sent")
        return ToolResult(data={"ticket_id": ticket_id, "sent": True}, effects=(effect,))


def _updated(ticket_id: str) -> Effect:
    return Effect(resource_id=f"ticket:{ticket_id}", kind="updated")
