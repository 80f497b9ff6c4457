"""The vendor registry's tools for scenario 2, and its seed data and deterministic fault.

``check_vendor`` (read, async, per-attempt timeout and two attempts), ``read_vendor_list`` (read,
reports the list version) and ``save_vendor_list`` (write, conditional on the version it was based
on, ``idempotency="native"``: the registry dedupes by the key the runtime mints).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, timedelta
from typing import Any

from actionspace.catalog.spec import RetryPolicy
from actionspace.demo.registry import Vendor, VendorRegistry, VersionConflict
from actionspace.errors import ToolError
from actionspace.execution.result import ToolResult
from actionspace.policy.principal import Principal
from actionspace.runtime import Runtime
from actionspace.types import Effect, Observation

__all__ = [
    "CHECK_RETRY",
    "CHECK_TIMEOUT_S",
    "COLLEAGUE",
    "CONCURRENT_VENDOR",
    "LIST_ID",
    "PRINCIPAL",
    "SLOW_VENDOR",
    "USER",
    "VENDORS",
    "SlowAnswers",
    "build_runtime",
    "describe",
    "entry_of",
    "merge_entries",
    "seed_registry",
]

USER = "u-lin"
COLLEAGUE = "u-mara"
LIST_ID = "approved-vendors"
VENDORS = ("v-acme", "v-birch", "v-cobalt")
SLOW_VENDOR = "v-cobalt"
CONCURRENT_VENDOR = "v-delta"
PRINCIPAL = Principal(id=USER, scopes=("read:*", "write:save_vendor_list"))

CHECK_TIMEOUT_S = 0.5
"""Per-attempt timeout of a vendor check, in seconds (a healthy check answers in milliseconds)."""
CHECK_RETRY = RetryPolicy(max_attempts=2, deadline_s=2.0, initial_backoff_s=0.05)
"""Two attempts at most: a vendor that stays silent ends ``transient``, never an unbounded wait."""


class SlowAnswers:
    """Deterministic fault: the registry answers checks of some vendors after ``delay_s`` seconds."""

    def __init__(self, vendors: Iterable[str], *, delay_s: float = CHECK_TIMEOUT_S * 20) -> None:
        self.vendors = frozenset(vendors)
        self.delay_s = delay_s

    async def wait(self, vendor_id: str) -> None:
        if vendor_id in self.vendors:
            await asyncio.sleep(self.delay_s)  # cancelled by the per-attempt timeout


def seed_registry(registry: VendorRegistry, today: date) -> None:
    """Four vendors with licences valid for a while after ``today``, and the empty internal list."""
    registry.seed(
        vendors=[
            Vendor(
                id="v-acme",
                name="Acme Analytics",
                product="acme-sdk",
                version="4.2.1",
                licence="Apache-2.0",
                licence_expires=today + timedelta(days=400),
            ),
            Vendor(
                id="v-birch",
                name="Birch Systems",
                product="birch-db",
                version="11.0.3",
                licence="commercial",
                licence_expires=today + timedelta(days=120),
            ),
            Vendor(
                id="v-cobalt",
                name="Cobalt Cloud",
                product="cobalt-agent",
                version="2.9.0",
                licence="commercial",
                licence_expires=today + timedelta(days=700),
            ),
            Vendor(
                id=CONCURRENT_VENDOR,
                name="Delta Freight",
                product="delta-api",
                version="1.4.0",
                licence="MIT",
                licence_expires=today + timedelta(days=365),
            ),
        ],
        lists=[(LIST_ID, "Approved vendors")],
    )


def build_runtime(registry: VendorRegistry, store: str, today: date, slow: SlowAnswers) -> Runtime:
    """The runtime with the registry's three tools."""
    rt = Runtime(store, principal=PRINCIPAL, state={"registry": registry})

    @rt.tool(effect="read", reads=["vendor:{vendor_id}"], timeout_s=CHECK_TIMEOUT_S, retry=CHECK_RETRY)
    async def check_vendor(vendor_id: str) -> ToolResult:
        """A vendor's licence (and whether it is valid today) and the product version it ships.

        Args:
            vendor_id: Registry id, e.g. v-acme.
        """
        await slow.wait(vendor_id)
        vendor = registry.vendor(vendor_id)
        if vendor is None:
            raise ToolError("permanent", f"no vendor {vendor_id}", resource_ids=[f"vendor:{vendor_id}"])
        valid = date.fromisoformat(vendor["licence_expires"]) >= today
        return ToolResult(data={**vendor, "licence_valid": valid}, resource_version=vendor["version"])

    @rt.tool(effect="read", reads=["vendorlist:{list_id}"])
    def read_vendor_list(list_id: str) -> ToolResult:
        """An internal vendor list with its entries and its current version.

        Args:
            list_id: The list, e.g. approved-vendors.
        """
        found = registry.read_list(list_id)
        if found is None:
            raise ToolError("permanent", f"no list {list_id}", resource_ids=[f"vendorlist:{list_id}"])
        return ToolResult(data=found, resource_version=str(found["version"]))

    @rt.tool(effect="write", writes=["vendorlist:{list_id}"], idempotency="native")
    def save_vendor_list(
        list_id: str,
        base_version: int,
        keep: list[dict[str, str]],
        add: list[dict[str, str]],
        idempotency_key: str,
    ) -> ToolResult:
        """Save a list as ``keep`` followed by the ``add`` entries not already in it.

        The save is refused with ``conflict`` if the list is no longer at ``base_version``.

        Args:
            list_id: The list to save.
            base_version: The version the list had when ``keep`` was read.
            keep: The entries read at ``base_version`` (vendor_id, name, version, licence, added_by).
            add: New entries (vendor_id, name, version, licence).
        """
        entries = merge_entries(keep, add)
        try:
            saved = registry.save_list(
                list_id, base_version=base_version, entries=entries, key=idempotency_key, author=USER
            )
        except VersionConflict as exc:
            raise ToolError(
                "conflict",
                f"{list_id} changed since version {base_version} (now {exc.current_version}); "
                "saving would overwrite another edit",
                current_version=str(exc.current_version),
                resource_ids=[f"vendorlist:{list_id}"],
                details={"base_version": base_version, "current_version": exc.current_version},
            ) from exc
        except LookupError as exc:
            raise ToolError("permanent", str(exc)) from exc
        effect = Effect(
            resource_id=f"vendorlist:{list_id}",
            kind="updated",
            version_before=str(base_version),
            version_after=str(saved["version"]),
        )
        return ToolResult(
            data=saved, effects=(effect,), resource_version=str(saved["version"]), remote_id=idempotency_key
        )

    return rt


def merge_entries(
    keep: Sequence[Mapping[str, str]], add: Sequence[Mapping[str, str]]
) -> list[dict[str, str]]:
    """``keep`` in order, then each entry of ``add`` whose vendor is not listed yet."""
    out = [dict(e) for e in keep]
    listed = {e["vendor_id"] for e in out}
    for entry in add:
        if entry["vendor_id"] not in listed:
            out.append(dict(entry))
            listed.add(entry["vendor_id"])
    return out


def entry_of(check: Mapping[str, Any]) -> dict[str, str]:
    return {
        "vendor_id": str(check["id"]),
        "name": str(check["name"]),
        "version": str(check["version"]),
        "licence": str(check["licence"]),
    }


def describe(obs: Observation) -> str | None:
    """A successful registry observation in words."""
    data = obs.data
    if obs.tool == "check_vendor":
        valid = "valid" if data["licence_valid"] else "EXPIRED"
        return (
            f"{data['name']}: {data['product']} {data['version']}, "
            f"{data['licence']} licence {valid} until {data['licence_expires']}"
        )
    if obs.tool == "read_vendor_list":
        listed = ", ".join(e["vendor_id"] for e in data["entries"]) or "empty"
        return f"version {data['version']}: {listed}"
    if obs.tool == "save_vendor_list":
        return f"saved as version {data['version']} ({data['entries']} entries), key {data['save_id']}"
    return None
