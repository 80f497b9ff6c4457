"""Tools the load test registers in ``actionspace serve --tools tests.service.load_tools:TOOLS``."""

from __future__ import annotations

from typing import Any

from actionspace import tool


@tool(effect="read")
def lookup(city: str) -> dict[str, Any]:
    """Weather of a city.

    Args:
        city: City name.
    """
    return {"city": city, "sky": "clear"}


@tool(effect="external", requires_approval=True, writes=["account:{to}"])
def pay(to: str, amount: int) -> dict[str, Any]:
    """Pay someone (always held for approval).

    Args:
        to: Recipient account.
        amount: Amount in cents.
    """
    return {"to": to, "amount": amount, "paid": True}


TOOLS = [lookup, pay]
