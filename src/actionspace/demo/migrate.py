"""Scenario 3 of the design: migrate three independent config files as one plan.

Each file goes from schema 1 (``timeout`` in seconds) to schema 2 (``timeout_ms``). The plan reads
the three files in parallel, patches them in parallel (each patch a conditional write against the
hash its read returned), checks each file locally (a read-only tool that parses it and validates
``timeout_ms``) and runs one global test after the three checks.

The fault is deterministic: someone edits the second file (``timeout`` 30 → 45) at the moment its
patch starts, i.e. between its read and its write. Three variants run, each in its own folder:

* ``independent`` — with the fault. The second patch gets ``stale_reference``; only its check and
  the global test are blocked (plan status ``partial``); the other two files are migrated and
  checked.
* ``switch_fault`` — the three patches form one plan group of mode ``switch`` (a
  :class:`~actionspace.resources.FileSwitchEnvironment`): each patch stages its file, and the
  files are switched in together only if every patch succeeded. With the fault nothing is
  switched: the first and third files are byte for byte what they were, the second holds only the
  outside edit.
* ``switch_clean`` — the same group without the fault: all three files change together.

Verdicts are computed from the files on disk after each run, not from what the plan reported.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from actionspace.errors import ToolError
from actionspace.execution.result import ToolResult
from actionspace.plan.model import Plan, PlanResult
from actionspace.resources import Conditional, FileStore, FileSwitch, FileSwitchEnvironment, sha256_hex
from actionspace.runtime import Runtime
from actionspace.types import Effect
from actionspace.validation.semantic import PathWithin

__all__ = [
    "CONFIGS",
    "FileOutcome",
    "MigrationReport",
    "VariantReport",
    "build_plan",
    "migrate_text",
    "render_migration",
    "run_migration",
]

CONFIGS: dict[str, dict[str, Any]] = {
    "billing.json": {"schema": 1, "service": "billing", "timeout": 5, "retries": 3},
    "search.json": {"schema": 1, "service": "search", "timeout": 30, "retries": 1},
    "gateway.json": {"schema": 1, "service": "gateway", "timeout": 12, "retries": 5},
}
"""The three files at schema 1; the second is the one edited underneath."""

FAULTY = "search.json"
ENVIRONMENT = "config-files"
F = TypeVar("F", bound=Callable[..., Any])
Expectation = Literal["migrated", "untouched", "edited_underneath"]


def _dump(config: dict[str, Any]) -> str:
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def migrate_text(text: str) -> str:
    """Schema 1 → 2: ``timeout`` (s) becomes ``timeout_ms``; raises ``invalid_arguments`` otherwise."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolError("invalid_arguments", f"not JSON: {exc}") from exc
    if (
        not isinstance(config, dict)
        or config.get("schema") != 1
        or not isinstance(config.get("timeout"), int)
    ):
        raise ToolError("invalid_arguments", "expected a schema 1 config with an integer timeout")
    out = {k: v for k, v in config.items() if k != "timeout"}
    out.update(schema=2, timeout_ms=config["timeout"] * 1000)
    return _dump(out)


def _problems(text: str) -> list[str]:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"not JSON: {exc}"]
    if not isinstance(config, dict):
        return ["not an object"]
    found = []
    if config.get("schema") != 2:
        found.append(f"schema is {config.get('schema')!r}, not 2")
    if not isinstance(config.get("timeout_ms"), int) or config["timeout_ms"] <= 0:
        found.append("timeout_ms is missing or not a positive integer")
    if "timeout" in config:
        found.append("the schema 1 key 'timeout' is still there")
    return found


class _Fault:
    """Edits ``path`` underneath once, the moment its patch starts (between its read and write)."""

    def __init__(self, root: Path, path: str | None) -> None:
        self.root, self.path, self.fired = root, path, False

    def before_patch(self, path: str) -> None:
        if path == self.path and not self.fired:
            self.fired = True
            config = json.loads((self.root / path).read_text())
            (self.root / path).write_text(_dump({**config, "timeout": 45}))


def _confined(root: Path) -> Callable[[F], F]:
    """Declare a tool's ``path`` argument confined to ``root``: escapes are rejected at validation."""

    def mark(fn: F) -> F:
        fn.__annotations__["path"] = Annotated[str, PathWithin(str(root))]
        return fn

    return mark


def _runtime(root: Path, store: str, fault: _Fault) -> Runtime:
    files = FileStore(root)
    rt = Runtime(store, recover_on_start=False)
    rt.environment(ENVIRONMENT, FileSwitchEnvironment(files))
    rooted = _confined(root)

    @rt.tool(effect="read", reads=["file:{path}"])
    @rooted
    def read_config(path: str) -> ToolResult:
        """Read a config file: its text and sha256 hash."""
        found = files.read(path)
        return ToolResult(
            data={"path": path, "content": found.text, "hash": found.hash}, resource_version=found.hash
        )

    @rt.tool(effect="write", writes=["file:{path}"], transaction=ENVIRONMENT)
    @rooted
    def patch_config(path: str, content: str, base: str, transaction: FileSwitch | None = None) -> ToolResult:
        """Migrate a config read earlier to schema 2; written only if the file still has hash ``base``.

        Args:
            path: The config file, relative to the config folder.
            content: The text that was read (its hash must be ``base``).
            base: The sha256 hash the read returned.
        """
        if sha256_hex(content.encode("utf-8")) != base:
            raise ToolError("invalid_arguments", "content does not match its base hash")
        fault.before_patch(path)
        new = migrate_text(content)
        if transaction is not None:
            new_hash = transaction.stage(path, new, expected_hash=base)
        else:
            new_hash = files.write(path, new, mode=Conditional(content_hash=base)).hash
        effect = Effect(
            resource_id=f"file:{path}", kind="updated", version_before=base, version_after=new_hash
        )
        return ToolResult(data={"path": path, "hash": new_hash}, effects=(effect,), resource_version=new_hash)

    @rt.tool(effect="read", reads=["file:{path}"])
    @rooted
    def check_config(path: str) -> dict[str, Any]:
        """Parse a migrated config and validate its schema and timeout_ms."""
        found = files.read(path)
        problems = _problems(found.text)
        if problems:
            raise ToolError("permanent", f"{path}: {'; '.join(problems)}", details={"problems": problems})
        return {"path": path, "hash": found.hash, "valid": True}

    @rt.tool(effect="read", reads=["file:"])
    def global_test(paths: list[str]) -> dict[str, Any]:
        """Check every config together: all at schema 2, service names unique."""
        with files.snapshot() as snap:
            configs = [json.loads(snap.read(p).text) for p in paths]
        services = [c.get("service") for c in configs]
        if any(c.get("schema") != 2 for c in configs) or len(set(services)) != len(services):
            raise ToolError("permanent", "the configs are not all at schema 2 with unique services")
        return {"checked": len(configs), "versions": dict(snap.versions)}

    return rt


def build_plan(paths: list[str], *, switch: bool) -> Plan:
    """The migration DAG; ``switch`` puts the three patches in one ``switch`` group."""
    nodes: list[dict[str, Any]] = []
    for i, path in enumerate(paths, 1):
        nodes.append({"id": f"read_{i}", "tool": "read_config", "arguments": {"path": path}})
    for i, path in enumerate(paths, 1):
        args = {
            "path": path,
            "content": {"$ref": f"read_{i}.data.content"},
            "base": {"$ref": f"read_{i}.data.hash"},
        }
        nodes.append({"id": f"patch_{i}", "tool": "patch_config", "arguments": args})
    for i, path in enumerate(paths, 1):
        nodes.append(
            {
                "id": f"check_{i}",
                "tool": "check_config",
                "arguments": {"path": path},
                "depends_on": [f"patch_{i}"],
            }
        )
    checks = [f"check_{i}" for i in range(1, len(paths) + 1)]
    nodes.append(
        {"id": "global_test", "tool": "global_test", "arguments": {"paths": paths}, "depends_on": checks}
    )
    groups = [{"id": "switch", "nodes": [f"patch_{i}" for i in range(1, len(paths) + 1)], "mode": "switch"}]
    return Plan.from_dict({"nodes": nodes, "groups": groups if switch else []})


@dataclass(frozen=True, slots=True, kw_only=True)
class FileOutcome:
    """One file after a variant, judged from its bytes on disk."""

    path: str
    expected: Expectation
    before_hash: str
    after_hash: str
    migrated: bool
    """The file on disk is a valid schema 2 config whose timeout_ms is 1000 × the original timeout."""
    ok: bool
    """The file on disk is what ``expected`` says."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "expected": self.expected,
            "before_hash": self.before_hash,
            "after_hash": self.after_hash,
            "migrated": self.migrated,
            "ok": self.ok,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantReport:
    """One run of the plan in its own folder."""

    name: str
    description: str
    expected_status: str
    status: str
    nodes: dict[str, dict[str, Any]]
    """Node id → status, error category, blocked_by / rolled_back when set."""
    files: tuple[FileOutcome, ...]
    max_parallel: int
    """Most nodes the scheduler ran at once (measured): the reads and patches overlap."""
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "expected_status": self.expected_status,
            "status": self.status,
            "nodes": self.nodes,
            "files": [f.to_dict() for f in self.files],
            "max_parallel": self.max_parallel,
            "passed": self.passed,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationReport:
    """Every variant; ``passed`` only when every variant's files are as expected on disk."""

    folder: str
    variants: tuple[VariantReport, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return bool(self.variants) and all(v.passed for v in self.variants)

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": self.folder,
            "passed": self.passed,
            "variants": [v.to_dict() for v in self.variants],
        }


_VARIANTS: tuple[tuple[str, str, bool, bool, str, dict[str, Expectation]], ...] = (
    (
        "independent",
        "parallel patches, search.json edited underneath: only its branch is blocked",
        False,
        True,
        "partial",
        {"billing.json": "migrated", "search.json": "edited_underneath", "gateway.json": "migrated"},
    ),
    (
        "switch_fault",
        "one switch group, same edit: nothing is switched",
        True,
        True,
        "partial",
        {"billing.json": "untouched", "search.json": "edited_underneath", "gateway.json": "untouched"},
    ),
    (
        "switch_clean",
        "one switch group, no edit: all three change together",
        True,
        False,
        "ok",
        {"billing.json": "migrated", "search.json": "migrated", "gateway.json": "migrated"},
    ),
)


def run_migration(folder: Path, *, store: str) -> MigrationReport:
    """Run the three variants in subfolders of ``folder`` (recreated) through a Runtime on ``store``."""
    variants = []
    for name, description, switch, faulty, expected_status, expectations in _VARIANTS:
        root = folder / name
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        originals = {path: _dump(config).encode("utf-8") for path, config in CONFIGS.items()}
        for path, data in originals.items():
            (root / path).write_bytes(data)
        rt = _runtime(root, store, _Fault(root, FAULTY if faulty else None))
        try:
            result = rt.run_plan(
                build_plan(list(CONFIGS), switch=switch), run_id=f"migrate-{name}-{uuid.uuid4().hex[:8]}"
            )
        finally:
            rt.close()
        files = tuple(_judge(root, path, originals[path], expectations[path]) for path in CONFIGS)
        nodes = _nodes(result)
        passed = result.status == expected_status and all(f.ok for f in files) and _blocking_ok(nodes, faulty)
        variants.append(
            VariantReport(
                name=name,
                description=description,
                expected_status=expected_status,
                status=result.status,
                nodes=nodes,
                files=files,
                max_parallel=int(result.stats.get("max_parallel", 0)),
                passed=passed,
            )
        )
    return MigrationReport(folder=str(folder), variants=tuple(variants))


def _judge(root: Path, path: str, original: bytes, expected: Expectation) -> FileOutcome:
    data = (root / path).read_bytes()
    source = json.loads(original)
    try:
        migrated = (
            not _problems(data.decode("utf-8")) and json.loads(data)["timeout_ms"] == source["timeout"] * 1000
        )
    except (UnicodeDecodeError, KeyError, json.JSONDecodeError):
        migrated = False
    if expected == "migrated":
        ok = migrated
    elif expected == "untouched":
        ok = data == original
    else:
        ok = data == _dump({**source, "timeout": 45}).encode("utf-8")
    return FileOutcome(
        path=path,
        expected=expected,
        before_hash=sha256_hex(original),
        after_hash=sha256_hex(data),
        migrated=migrated,
        ok=ok,
    )


def _nodes(result: PlanResult) -> dict[str, dict[str, Any]]:
    out = {}
    for node_id, obs in sorted(result.nodes.items()):
        entry: dict[str, Any] = {"status": obs.status, "category": obs.error.category if obs.error else None}
        if obs.error is not None:
            for key in ("blocked_by", "rolled_back"):
                if key in obs.error.details:
                    entry[key] = obs.error.details[key]
        out[node_id] = entry
    return out


def _blocking_ok(nodes: dict[str, dict[str, Any]], faulty: bool) -> bool:
    """With the fault: the faulty patch is stale and the global test blocked; without: all ok."""
    if not faulty:
        return all(n["status"] == "ok" for n in nodes.values())
    stale = nodes["patch_2"]["category"] == "stale_reference"
    return stale and nodes["global_test"].get("blocked_by") is not None


def render_migration(report: MigrationReport) -> RenderableType:
    """One table per variant: every file's expectation and what is on disk, and the node outcomes."""
    parts: list[RenderableType] = []
    for v in report.variants:
        table = Table(title=f"{v.name}: {v.description}", expand=True)
        table.add_column("file")
        table.add_column("expected")
        table.add_column("on disk")
        table.add_column("verdict", no_wrap=True)
        for f in v.files:
            disk = (
                "schema 2"
                if f.migrated
                else ("unchanged" if f.before_hash == f.after_hash else "edited, schema 1")
            )
            table.add_row(
                f.path,
                f.expected.replace("_", " "),
                disk,
                Text("ok" if f.ok else "WRONG", style="green" if f.ok else "red"),
            )
        outcomes = ", ".join(
            f"{k}={n['category'] or n['status']}"
            + (f" (blocked by {n['blocked_by']})" if "blocked_by" in n else "")
            for k, n in v.nodes.items()
        )
        table.caption = (
            f"plan {v.status} (expected {v.expected_status}), {v.max_parallel} at once; {outcomes}"
        )
        parts.append(table)
    verdict = "PASSED" if report.passed else "FAILED"
    parts.append(Text(f"config migration: {verdict}", style="bold green" if report.passed else "bold red"))
    return Group(*parts)
