"""Scenario 3: the config migration, judged by what is on disk afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from actionspace.demo.migrate import (
    CONFIGS,
    MigrationReport,
    build_plan,
    migrate_text,
    render_migration,
    run_migration,
)
from actionspace.resources.journal import TEMP_SUFFIX


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, MigrationReport]:
    folder = tmp_path_factory.mktemp("migration")
    return folder, run_migration(folder, store="memory://")


def _on_disk(folder: Path, variant: str) -> dict[str, dict[str, Any]]:
    return {name: json.loads((folder / variant / name).read_text()) for name in CONFIGS}


def _schema2(config: dict[str, Any], source: dict[str, Any]) -> bool:
    return (
        config.get("schema") == 2
        and "timeout" not in config
        and config["timeout_ms"] == source["timeout"] * 1000
    )


def test_with_independent_patches_only_the_edited_file_is_left_and_its_branch_blocked(
    migrated: tuple[Path, MigrationReport],
) -> None:
    folder, report = migrated
    disk = _on_disk(folder, "independent")
    assert _schema2(disk["billing.json"], CONFIGS["billing.json"])
    assert _schema2(disk["gateway.json"], CONFIGS["gateway.json"])
    assert disk["search.json"] == {**CONFIGS["search.json"], "timeout": 45}  # the outside edit, not ours
    variant = report.variants[0]
    assert variant.name == "independent" and variant.status == "partial"
    assert variant.nodes["patch_2"]["category"] == "stale_reference"
    assert variant.nodes["check_2"]["blocked_by"] == "patch_2"
    assert variant.nodes["global_test"]["blocked_by"] == "patch_2"
    assert {variant.nodes[k]["status"] for k in ("patch_1", "patch_3", "check_1", "check_3")} == {"ok"}
    assert variant.max_parallel >= 2


def test_a_switch_group_with_the_same_edit_switches_nothing(migrated: tuple[Path, MigrationReport]) -> None:
    folder, report = migrated
    for name in ("billing.json", "gateway.json"):
        original = json.dumps(CONFIGS[name], indent=2, sort_keys=True) + "\n"
        assert (folder / "switch_fault" / name).read_text() == original
    assert _on_disk(folder, "switch_fault")["search.json"] == {**CONFIGS["search.json"], "timeout": 45}
    variant = report.variants[1]
    assert variant.status == "partial"
    assert variant.nodes["switch"]["category"] == "stale_reference"
    assert variant.nodes["patch_1"].get("rolled_back") is True
    assert all(variant.nodes[f"check_{i}"]["blocked_by"] == "switch" for i in (1, 2, 3))


def test_a_switch_group_without_the_edit_changes_all_three_files(
    migrated: tuple[Path, MigrationReport],
) -> None:
    folder, report = migrated
    disk = _on_disk(folder, "switch_clean")
    assert all(_schema2(disk[name], CONFIGS[name]) for name in CONFIGS)
    assert report.variants[2].status == "ok"


def test_no_temporaries_or_journals_are_left_behind(migrated: tuple[Path, MigrationReport]) -> None:
    folder, _ = migrated
    assert list(folder.rglob(f"*{TEMP_SUFFIX}")) == []
    assert list(folder.rglob("journal/*.json")) == []


def test_the_report_passes_and_serializes_and_renders(migrated: tuple[Path, MigrationReport]) -> None:
    _, report = migrated
    assert report.passed
    data = json.loads(json.dumps(report.to_dict()))
    assert data["passed"] is True
    assert [v["name"] for v in data["variants"]] == ["independent", "switch_fault", "switch_clean"]
    console = Console(width=160, record=True)
    console.print(render_migration(report))
    assert "config migration: PASSED" in console.export_text()


def test_the_verdict_reads_the_disk_so_a_wrong_file_fails_it(tmp_path: Path) -> None:
    from actionspace.demo.migrate import _judge

    original = (json.dumps(CONFIGS["billing.json"], indent=2, sort_keys=True) + "\n").encode()
    (tmp_path / "billing.json").write_bytes(original)
    assert _judge(tmp_path, "billing.json", original, "untouched").ok
    assert not _judge(tmp_path, "billing.json", original, "migrated").ok
    (tmp_path / "billing.json").write_text(migrate_text(original.decode()))
    assert _judge(tmp_path, "billing.json", original, "migrated").ok
    assert not _judge(tmp_path, "billing.json", original, "untouched").ok


def test_the_migration_runs_on_a_sqlite_store_too(tmp_path: Path) -> None:
    report = run_migration(tmp_path / "files", store=f"sqlite:///{tmp_path / 'actionspace.db'}")
    assert report.passed, report.to_dict()


def test_the_plan_orders_each_patch_after_its_read_and_each_check_after_its_patch() -> None:
    plan = build_plan(list(CONFIGS), switch=False)
    assert [n.id for n in plan.nodes][:3] == ["read_1", "read_2", "read_3"]
    assert plan["patch_2"].arguments["base"] == {"$ref": "read_2.data.hash"}
    assert plan["check_2"].depends_on == ("patch_2",)
    assert plan["global_test"].depends_on == ("check_1", "check_2", "check_3")
    assert build_plan(list(CONFIGS), switch=True).groups[0].mode == "switch"
