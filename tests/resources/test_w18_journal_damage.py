"""A damaged switch journal never wedges the store, and no half-switched group is ever acted on.

The journals here are real ones: a group switch is interrupted between its renames (the first file
switched, the others not), then its journal is cut at every byte offset, or replaced by garbage, or
made to name places outside the root.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.errors import ToolError
from actionspace.resources import Conditional, FileStore, GroupWrite, Overwrite, RenameStep, sha256_hex
from actionspace.resources.journal import TEMP_SUFFIX

OLD = {"a.txt": b"alpha", "b.txt": b"beta", "c.txt": b"gamma"}
NEW = {"a.txt": b"ALPHA", "b.txt": b"BETA", "c.txt": b"GAMMA", "d.txt": b"DELTA"}
KEY = "switch-w18"


class Crash(Exception):
    """Stands for the process dying between two renames."""


def _crash_before(index: int) -> Callable[[RenameStep], None]:
    def hook(step: RenameStep) -> None:
        if step.index == index:
            raise Crash(step.path)

    return hook


def _crashed_switch(root: Path, at: int = 1) -> Path:
    """``root`` seeded with OLD and a switch to NEW interrupted before rename ``at``; its journal."""
    root.mkdir()
    for name, data in OLD.items():
        (root / name).write_bytes(data)
    writes = [
        GroupWrite(path=n, content=d, expected_hash=sha256_hex(OLD[n]) if n in OLD else "absent")
        for n, d in NEW.items()
    ]
    with pytest.raises(Crash):
        FileStore(root, between_renames=_crash_before(at)).apply_group(writes, key=KEY)
    (journal,) = (root / ".actionspace" / "journal").glob("*.json")
    return journal


def _state(root: Path) -> dict[str, bytes]:
    return {n: (root / n).read_bytes() for n in NEW if (root / n).exists()}


def _leftovers(root: Path) -> list[str]:
    return [
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if "quarantine" not in p.parts
        and (p.name.endswith(TEMP_SUFFIX) or p.suffix in (".bak", ".json", ".copy"))
    ]


def _later_writes_work(store: FileStore, root: Path) -> None:
    base = store.read("a.txt").hash
    store.write("a.txt", "later", mode=Conditional(content_hash=base))
    store.apply_group([GroupWrite(path="e.txt", content=b"epsilon", expected_hash="absent")], key="later")
    assert (root / "a.txt").read_text() == "later" and (root / "e.txt").read_text() == "epsilon"
    assert store.committed("later") is True


@pytest.mark.slow
def test_a_journal_cut_at_any_byte_is_recovered_whole_from_its_other_copy(tmp_path: Path) -> None:
    template = tmp_path / "template"
    journal = _crashed_switch(template)
    text = journal.read_bytes()
    for cut in range(len(text)):
        root = tmp_path / f"cut{cut}"
        shutil.copytree(template, root, symlinks=True)
        damaged = root / journal.relative_to(template)
        damaged.write_bytes(text[:cut])
        store = FileStore(root)
        state = _state(root)
        assert state in (OLD, NEW), (cut, state)  # never a group half switched
        assert [r.action for r in store.recovered] == ["replayed"], cut
        assert store.committed(KEY) is True and _leftovers(root) == [], cut
        _later_writes_work(store, root)


@pytest.mark.slow
@pytest.mark.parametrize("at", [1, 3])
def test_both_copies_cut_at_any_byte_are_rolled_back_when_provable_and_quarantined_otherwise(
    tmp_path: Path, at: int
) -> None:
    template = tmp_path / f"template{at}"
    journal = _crashed_switch(template, at)
    text = journal.read_bytes()
    for cut in range(len(text)):
        root = tmp_path / f"both{at}-{cut}"
        shutil.copytree(template, root, symlinks=True)
        for copy in (root / journal.relative_to(template)).parent.iterdir():
            if copy.is_file():
                copy.write_bytes(text[:cut])
        store = FileStore(root)
        (found,) = store.recovered
        if found.action == "rolled_back":
            assert _state(root) == OLD, cut  # never a group half switched
            assert store.committed(KEY) is False
        else:
            assert found.action == "quarantined", cut
            kept = root / found.quarantine  # type: ignore[operator]
            assert (kept / "journal.json").read_bytes() == text[:cut] and (kept / "backups").is_dir()
            assert store.committed(KEY) in (None, False)  # unknown, or the key itself was cut off
        assert _leftovers(root) == [], cut
        _later_writes_work(store, root)


def test_a_cut_journal_naming_an_entry_not_yet_switched_is_rolled_back(tmp_path: Path) -> None:
    root = tmp_path / "r"
    journal = _crashed_switch(root, at=1)  # a.txt switched, b.txt not: its temporary is still there
    lines = journal.read_bytes().split(b"\n")
    for copy in journal.parent.iterdir():
        if copy.is_file():
            copy.write_bytes(b"\n".join(lines[:3]) + b"\n" + lines[3][:10])  # header, a.txt, b.txt, a cut
    assert _state(root)["a.txt"] == b"ALPHA"
    store = FileStore(root)
    assert [r.action for r in store.recovered] == ["rolled_back"]
    assert _state(root) == OLD and _leftovers(root) == []
    assert store.committed(KEY) is False


def test_a_journal_found_damaged_by_a_write_fails_that_write_once_then_writes_go_on(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    store = FileStore(root)
    journal_dir = root / ".actionspace" / "journal"
    (journal_dir / "0123.json").write_bytes(b"\x00garbage\xff")
    (journal_dir / "0123").mkdir()
    with pytest.raises(ToolError) as exc:
        store.write("a.txt", "mine", mode=Overwrite())
    assert exc.value.error.category == "conflict"
    assert exc.value.error.details["written"] is False
    assert (root / "a.txt").read_text() == "alpha"
    store.write("a.txt", "mine", mode=Overwrite())
    assert (root / "a.txt").read_text() == "mine"
    (kept,) = (root / ".actionspace" / "quarantine").iterdir()
    assert kept.name.endswith("-0123") and (kept / "journal.json").read_bytes() == b"\x00garbage\xff"


def test_a_journal_that_is_a_directory_or_a_symlink_is_quarantined(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    FileStore(root)
    journal_dir = root / ".actionspace" / "journal"
    (journal_dir / "dir.json").mkdir()
    (journal_dir / "link.json").symlink_to(root / "a.txt")
    store = FileStore(root)
    assert sorted(r.action for r in store.recovered) == ["quarantined", "quarantined"]
    _later_writes_work(store, root)


def _forged(root: Path, entries: list[dict[str, object]]) -> None:
    journal = root / ".actionspace" / "journal" / "feed.json"
    journal.write_text(json.dumps({"key": "forged", "entries": entries}))


def test_a_journal_naming_paths_outside_the_root_is_never_acted_on(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    FileStore(root)
    _forged(
        root,
        [
            {"path": "../victim.txt", "temp": "../gone", "new_hash": sha256_hex(b"precious"), "backup": None},
            {"path": "a.txt", "temp": ".a.txt.x.as-tmp", "new_hash": "0" * 64, "backup": None},
        ],
    )
    store = FileStore(root)
    assert [r.action for r in store.recovered] == ["quarantined"]
    assert victim.read_text() == "precious" and (root / "a.txt").read_text() == "alpha"
    assert store.committed("forged") is None


def test_a_journal_restoring_a_backup_from_outside_the_state_directory_is_never_acted_on(
    tmp_path: Path,
) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("alpha")
    (root / "b.txt").write_text("planted")
    FileStore(root)
    entry: dict[str, object] = {
        "path": "a.txt",
        "temp": ".a.txt.x.as-tmp",
        "new_hash": sha256_hex(b"alpha"),
        "backup": "b.txt",
    }
    _forged(root, [entry, {**entry, "path": "c.txt", "temp": ".c.txt.y.as-tmp", "backup": None}])
    store = FileStore(root)
    assert [r.action for r in store.recovered] == ["quarantined"]
    assert (root / "a.txt").read_text() == "alpha" and (root / "b.txt").read_text() == "planted"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_any_bytes_as_a_journal_never_wedge_the_store_nor_touch_a_file(
    tmp_path: Path, garbage: bytes
) -> None:
    root = tmp_path / f"g{sha256_hex(garbage)[:16]}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    for name, data in OLD.items():
        (root / name).write_bytes(data)
    FileStore(root)
    (root / ".actionspace" / "journal" / "junk.json").write_bytes(garbage)
    store = FileStore(root)
    assert [r.action for r in store.recovered] in (["quarantined"], ["rolled_back"], ["replayed"])
    assert _state(root) == OLD
    store.write("a.txt", "after", mode=Overwrite())
    assert (root / "a.txt").read_text() == "after"
