"""Scenario 2 of the design: check three vendors in parallel, keep what was confirmed, merge on conflict.

"Verify the licences and versions of three vendors in parallel; one times out (transient), the two
others are kept; write the two confirmed vendors to an internal list with its version and an
idempotency key; a concurrent edit causes a conflict; re-read and merge without overwriting the
other edit." Every step is a :class:`Plan` run against a real SQLite vendor registry; the verdict
is read back from the registry's own tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from actionspace.demo.registry import VendorRegistry
from actionspace.demo.steps import PlanStep, steps_of
from actionspace.demo.vendor_tools import (
    CHECK_RETRY,
    CHECK_TIMEOUT_S,
    COLLEAGUE,
    CONCURRENT_VENDOR,
    LIST_ID,
    PRINCIPAL,
    SLOW_VENDOR,
    USER,
    VENDORS,
    SlowAnswers,
    build_runtime,
    describe,
    entry_of,
    merge_entries,
    seed_registry,
)
from actionspace.plan import Plan, PlanNode, PlanResult
from actionspace.runtime import Runtime

__all__ = [
    "CHECK_TIMEOUT_S",
    "LIST_ID",
    "REQUEST",
    "SLOW_VENDOR",
    "VENDORS",
    "SlowAnswers",
    "VendorsReport",
    "build_runtime",
    "merge_entries",
    "run_vendors",
    "seed_registry",
]

REQUEST = (
    "verify the licences and versions of Acme, Birch and Cobalt in parallel, "
    "then add the confirmed ones to the approved-vendors list"
)


@dataclass
class VendorsReport:
    """What scenario 2 did and what the registry holds afterwards."""

    run_id: str
    store: str
    folder: str
    request: str
    steps: list[PlanStep]
    plans: dict[str, str]
    """Plan name → its status (``ok`` / ``partial`` / ``error``)."""
    final_list: dict[str, Any]
    """The list as the registry holds it at the end (read from its tables)."""
    saves: list[dict[str, Any]]
    """Every save the registry accepted for the list (one row per idempotency key)."""
    resend: dict[str, Any]
    checks: dict[str, bool] = field(default_factory=dict)
    """Each verdict, computed from the registry's state and the observations."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(self.checks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": 2,
            "run_id": self.run_id,
            "store": self.store,
            "folder": self.folder,
            "request": self.request,
            "steps": [s.to_dict() for s in self.steps],
            "plans": self.plans,
            "final_list": self.final_list,
            "saves": self.saves,
            "resend": self.resend,
            "checks": self.checks,
            "passed": self.passed,
        }


_INTENTS_VERIFY = {
    "check-acme": "check Acme's licence and version",
    "check-birch": "check Birch's licence and version",
    "check-cobalt": "check Cobalt's licence and version",
    "read-list": "read the internal list and its version",
}
_NEXT = {
    "check-acme": "confirmed: goes on the list",
    "check-birch": "confirmed: goes on the list",
    "read-list": "the save will be conditional on this version",
    "transient": "keep the siblings' results; leave Cobalt out of this write",
    "conflict": "re-read the list and merge, keeping the other edit",
}


def run_vendors(folder: Path, *, store: str, today: date | None = None) -> VendorsReport:
    """Run scenario 2 against a vendor registry in ``folder``; the trace goes to ``store``."""
    folder.mkdir(parents=True, exist_ok=True)
    day = today or date.today()
    registry = VendorRegistry(folder / "vendors.db")
    seed_registry(registry, day)
    rt = build_runtime(registry, store, day, SlowAnswers([SLOW_VENDOR]))
    run_id = rt.new_run(principal=PRINCIPAL)
    try:
        return _play(rt, registry, run_id, store, folder)
    finally:
        rt.close()
        registry.close()


def _play(rt: Runtime, registry: VendorRegistry, run_id: str, store: str, folder: Path) -> VendorsReport:
    steps: list[PlanStep] = []
    checks = [PlanNode(id=f"check-{v[2:]}", tool="check_vendor", arguments={"vendor_id": v}) for v in VENDORS]
    verify = rt.run_plan(
        Plan(
            nodes=[*checks, PlanNode(id="read-list", tool="read_vendor_list", arguments={"list_id": LIST_ID})]
        ),
        run_id=run_id,
    )
    steps += steps_of(
        verify, plan="verify", start=1, intents=_INTENTS_VERIFY, next_moves=_NEXT, describe=describe
    )
    confirmed = [entry_of(o.data) for n in checks if (o := verify.nodes[n.id]).ok and o.data["licence_valid"]]
    seen = verify.nodes["read-list"].data

    steps.append(_concurrent_edit(registry, len(steps) + 1))

    stale = rt.run_plan(
        Plan(nodes=[_save("save", base_version=seen["version"], keep=seen["entries"], add=confirmed)]),
        run_id=run_id,
    )
    steps += steps_of(
        stale,
        plan="write",
        start=len(steps) + 1,
        intents={"save": f"save the list at version {seen['version']} with the confirmed vendors"},
        next_moves=_NEXT,
        describe=describe,
    )

    merged = rt.run_plan(
        Plan(
            nodes=[
                PlanNode(id="reread", tool="read_vendor_list", arguments={"list_id": LIST_ID}),
                _save(
                    "save-merged",
                    base_version={"$ref": "reread.data.version"},
                    keep={"$ref": "reread.data.entries"},
                    add=confirmed,
                ),
            ]
        ),
        run_id=run_id,
    )
    steps += steps_of(
        merged,
        plan="merge",
        start=len(steps) + 1,
        intents={
            "reread": "re-read the list (new version, other edit included)",
            "save-merged": "save the merge at the new version",
        },
        next_moves={
            "reread": "merge: keep every entry read, add the confirmed vendors",
            "save-merged": "send it again with the same key: nothing may change",
        },
        describe=describe,
    )
    resend = _resend(rt, registry, run_id, merged)
    steps.append(
        PlanStep(
            index=len(steps) + 1,
            plan="resend",
            node="save-merged",
            tool="save_vendor_list",
            intent="send the same save again, same key",
            status=resend["runtime_status"],
            category=None,
            detail=f"ledger attempts {resend['ledger_attempts']}; the registry answered "
            f"replayed={resend['registry_replayed']}; saves with that key: {resend['saves_with_key']}",
            next_move="done",
        )
    )
    report = VendorsReport(
        run_id=run_id,
        store=store,
        folder=str(folder),
        request=REQUEST,
        steps=steps,
        plans={"verify": verify.status, "write": stale.status, "merge": merged.status},
        final_list=registry.read_list(LIST_ID) or {},
        saves=registry.saves(LIST_ID),
        resend=resend,
    )
    report.checks = _checks(rt, registry, run_id, verify, stale, merged, report)
    rt.record(run_id, "verified", {"predicate": "scenario 2 checks", "checks": report.checks})
    rt.finish(run_id, status="ok" if report.passed else "failed")
    return report


def _save(node: str, *, base_version: Any, keep: Any, add: list[dict[str, str]]) -> PlanNode:
    return PlanNode(
        id=node,
        tool="save_vendor_list",
        arguments={"list_id": LIST_ID, "base_version": base_version, "keep": keep, "add": add},
    )


def _concurrent_edit(registry: VendorRegistry, index: int) -> PlanStep:
    """A colleague adds Delta Freight through the registry's own API, between our read and our write."""
    current = registry.read_list(LIST_ID)
    vendor = registry.vendor(CONCURRENT_VENDOR)
    assert current is not None and vendor is not None
    entry = {**entry_of(vendor), "added_by": COLLEAGUE}
    saved = registry.save_list(
        LIST_ID,
        base_version=current["version"],
        entries=[*current["entries"], entry],
        key=f"{COLLEAGUE}-{current['version']}",
        author=COLLEAGUE,
    )
    return PlanStep(
        index=index,
        plan="outside",
        node="-",
        tool="registry (another writer)",
        intent=f"{COLLEAGUE} adds {vendor['name']} to the list",
        status="ok",
        category=None,
        detail=f"{LIST_ID} version {current['version']} -> {saved['version']}",
        next_move="our write was based on the old version",
    )


def _resend(rt: Runtime, registry: VendorRegistry, run_id: str, merged: PlanResult) -> dict[str, Any]:
    """Send the committed save again: through the runtime (same node, same arguments) and to the registry."""
    entry = rt.ledger.get_node(run_id, "save-merged")
    if entry is None or not merged.nodes["save-merged"].ok:
        return {
            "key": None,
            "runtime_status": "skipped",
            "ledger_attempts": 0,
            "registry_replayed": False,
            "saves_with_key": 0,
            "entries_before": 0,
            "entries_after": 0,
        }
    args = dict(entry.arguments)
    before = registry.read_list(LIST_ID) or {"entries": [], "version": 0}
    again = rt.run_plan(
        Plan(nodes=[_save("save-merged", **{k: args[k] for k in ("base_version", "keep", "add")})]),
        run_id=run_id,
    )
    retransmit = registry.save_list(
        LIST_ID,
        base_version=int(args["base_version"]),
        entries=merge_entries(args["keep"], args["add"]),
        key=entry.key,
        author=USER,
    )
    after = registry.read_list(LIST_ID) or {"entries": [], "version": 0}
    settled = rt.ledger.get_node(run_id, "save-merged")
    return {
        "key": entry.key,
        "runtime_status": again.nodes["save-merged"].status,
        "ledger_attempts": settled.attempts if settled else 0,
        "registry_replayed": bool(retransmit.get("replayed")),
        "saves_with_key": registry.saves_with_key(entry.key),
        "entries_before": len(before["entries"]),
        "entries_after": len(after["entries"]),
        "version_before": before["version"],
        "version_after": after["version"],
    }


def _checks(
    rt: Runtime,
    registry: VendorRegistry,
    run_id: str,
    verify: PlanResult,
    stale: PlanResult,
    merged: PlanResult,
    report: VendorsReport,
) -> dict[str, bool]:
    slow = verify.nodes[f"check-{SLOW_VENDOR[2:]}"]
    stale_entry = rt.ledger.get_node(run_id, "save")
    listed = [e["vendor_id"] for e in report.final_list.get("entries", [])]
    confirmed = [v for v in VENDORS if v != SLOW_VENDOR]
    resend = report.resend
    return {
        "slow vendor ended transient after bounded retries": slow.error is not None
        and slow.error.category == "transient"
        and slow.error.details.get("attempts") == CHECK_RETRY.max_attempts,
        "the two other checks were kept (plan partial)": verify.status == "partial"
        and all(verify.nodes[f"check-{v[2:]}"].ok for v in confirmed),
        "the stale save was refused with conflict and wrote nothing": stale.nodes["save"].error is not None
        and stale.nodes["save"].error.category == "conflict"
        and stale_entry is not None
        and registry.saves_with_key(stale_entry.key) == 0,
        "the merged save committed": merged.status == "ok",
        "the list holds both confirmed vendors and the other edit": sorted(listed)
        == sorted([*confirmed, CONCURRENT_VENDOR]),
        "each vendor is listed once": len(listed) == len(set(listed)),
        "resending with the same key wrote nothing": resend["saves_with_key"] == 1
        and resend["entries_after"] == resend["entries_before"]
        and resend.get("version_after") == resend.get("version_before"),
    }
