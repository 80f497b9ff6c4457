from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from actionspace.demo.registry import VendorRegistry, VersionConflict
from actionspace.demo.vendors import (
    CHECK_TIMEOUT_S,
    LIST_ID,
    SlowAnswers,
    VendorsReport,
    build_runtime,
    merge_entries,
    run_vendors,
    seed_registry,
)
from actionspace.plan import Plan, PlanNode

TODAY = date(2026, 11, 30)


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[VendorsReport, Path]:
    folder = tmp_path_factory.mktemp("vendors")
    return run_vendors(folder, store="memory://", today=TODAY), folder


def _step(report: VendorsReport, plan: str, node: str) -> dict[str, object]:
    [step] = [s.to_dict() for s in report.steps if s.plan == plan and s.node == node]
    return step


def test_the_slow_vendor_ends_transient_after_its_attempts_and_its_siblings_are_kept(
    ran: tuple[VendorsReport, Path],
) -> None:
    report, _ = ran
    slow = _step(report, "verify", "check-cobalt")
    assert slow["category"] == "transient"
    error = report.steps[2].observation["error"]
    assert error["details"]["attempts"] == 2 and error["details"]["timeout_s"] == CHECK_TIMEOUT_S
    assert _step(report, "verify", "check-acme")["status"] == "ok"
    assert _step(report, "verify", "check-birch")["status"] == "ok"
    assert report.plans["verify"] == "partial"


def test_the_stale_save_is_a_conflict_then_the_merged_save_succeeds(ran: tuple[VendorsReport, Path]) -> None:
    report, _ = ran
    stale = _step(report, "write", "save")
    assert stale["category"] == "conflict"
    assert report.steps[5].observation["error"]["current_version"] == "2"
    assert [s.category for s in report.steps if s.plan == "merge"] == [None, None]
    assert report.plans == {"verify": "partial", "write": "error", "merge": "ok"}


def test_the_registry_holds_both_confirmed_vendors_and_the_concurrent_entry_once_each(
    ran: tuple[VendorsReport, Path],
) -> None:
    _, folder = ran
    registry = VendorRegistry(folder / "vendors.db")
    try:
        final = registry.read_list(LIST_ID)
        assert final is not None
        assert [(e["vendor_id"], e["added_by"]) for e in final["entries"]] == [
            ("v-delta", "u-mara"),
            ("v-acme", "u-lin"),
            ("v-birch", "u-lin"),
        ]
        assert [e["version"] for e in final["entries"]] == ["1.4.0", "4.2.1", "11.0.3"]
        assert final["version"] == 3
        saves = registry.saves(LIST_ID)
        assert [(s["author"], s["base_version"], s["version_after"]) for s in saves] == [
            ("u-mara", 1, 2),
            ("u-lin", 2, 3),
        ]
    finally:
        registry.close()


def test_resending_the_save_with_the_same_key_writes_nothing(ran: tuple[VendorsReport, Path]) -> None:
    report, folder = ran
    key = report.resend["key"]
    assert report.resend["registry_replayed"] is True
    assert report.resend["ledger_attempts"] == 1
    registry = VendorRegistry(folder / "vendors.db")
    try:
        assert registry.saves_with_key(key) == 1
        before = registry.read_list(LIST_ID)
        assert before is not None
        again = registry.save_list(LIST_ID, base_version=2, entries=[], key=key, author="u-lin")
        assert again["replayed"] is True and again["version"] == 3
        assert registry.read_list(LIST_ID) == before
    finally:
        registry.close()


def test_the_verdict_passes_and_the_report_is_json(ran: tuple[VendorsReport, Path]) -> None:
    report, _ = ran
    assert report.passed, report.checks
    data = json.loads(json.dumps(report.to_dict()))
    assert data["passed"] is True and data["scenario"] == 2
    assert len(data["steps"]) == len(report.steps)


def test_a_save_on_an_old_version_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    registry = VendorRegistry(tmp_path / "vendors.db")
    seed_registry(registry, TODAY)
    entry = {"vendor_id": "v-acme", "name": "Acme Analytics", "version": "4.2.1", "licence": "Apache-2.0"}
    registry.save_list(LIST_ID, base_version=1, entries=[entry], key="k1", author="u-mara")
    rt = build_runtime(registry, "memory://", TODAY, SlowAnswers(()))
    try:
        node = PlanNode(
            id="save",
            tool="save_vendor_list",
            arguments={"list_id": LIST_ID, "base_version": 1, "keep": [], "add": [entry]},
        )
        result = rt.run_plan(Plan(nodes=[node]))
        error = result.nodes["save"].error
        assert error is not None and error.category == "conflict" and error.current_version == "2"
        assert registry.read_list(LIST_ID) == {
            "list_id": LIST_ID,
            "name": "Approved vendors",
            "version": 2,
            "entries": [{**entry, "added_by": "u-mara"}],
        }
        with pytest.raises(VersionConflict):
            registry.save_list(LIST_ID, base_version=1, entries=[], key="k2", author="u-lin")
    finally:
        rt.close()
        registry.close()


def test_merging_keeps_the_read_entries_in_order_and_adds_only_new_vendors() -> None:
    keep = [{"vendor_id": "v-delta", "added_by": "u-mara"}, {"vendor_id": "v-acme", "added_by": "u-mara"}]
    add = [{"vendor_id": "v-acme"}, {"vendor_id": "v-birch"}, {"vendor_id": "v-birch"}]
    assert merge_entries(keep, add) == [*keep, {"vendor_id": "v-birch"}]
