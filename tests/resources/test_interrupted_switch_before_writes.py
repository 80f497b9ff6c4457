"""A switch group interrupted by a crash is finished (or undone) before any later write of the
store: a write made after the crash, through a store opened before it, is never overwritten when
the interrupted switch is replayed later."""

from __future__ import annotations

from pathlib import Path

import pytest

from actionspace.errors import ToolError
from actionspace.resources import Conditional, FileStore, GroupWrite, Overwrite, RenameStep


class Crash(Exception):
    """Stands for the process dying between two renames."""


def _crash_before_second_rename(step: RenameStep) -> None:
    if step.index == 1:
        raise Crash(step.path)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "b.txt").write_text("beta")
    return tmp_path


def _crash_mid_switch(root: Path) -> None:
    crashing = FileStore(root, between_renames=_crash_before_second_rename)
    writes = [
        GroupWrite(path=p, content=b"new " + p.encode(), expected_hash=None) for p in ("a.txt", "b.txt")
    ]
    with pytest.raises(Crash):
        crashing.apply_group(writes, key="switch-1")
    assert (root / "a.txt").read_text() == "new a.txt" and (root / "b.txt").read_text() == "beta"


def test_a_write_after_a_crashed_switch_is_checked_against_the_finished_switch(root: Path) -> None:
    survivor = FileStore(root)  # another process's store, opened before the crash
    base = survivor.read("b.txt").hash
    _crash_mid_switch(root)
    with pytest.raises(ToolError) as exc:
        survivor.write("b.txt", "edited by the survivor", mode=Conditional(content_hash=base))
    assert exc.value.error.category == "stale_reference"
    assert (root / "b.txt").read_text() == "new b.txt"
    assert FileStore(root).recovered == []


def test_an_overwrite_after_a_crashed_switch_is_never_undone_by_its_replay(root: Path) -> None:
    survivor = FileStore(root)
    _crash_mid_switch(root)
    survivor.write("b.txt", "last word", mode=Overwrite())
    assert FileStore(root).recovered == []
    assert (root / "b.txt").read_text() == "last word"
    assert survivor.committed("switch-1")


def test_a_group_after_a_crashed_switch_sees_it_finished(root: Path) -> None:
    survivor = FileStore(root)
    base = survivor.read("a.txt").hash
    _crash_mid_switch(root)
    with pytest.raises(ToolError) as exc:
        survivor.apply_group(
            [
                GroupWrite(path="b.txt", content=b"mine", expected_hash=survivor.read("b.txt").hash),
                GroupWrite(path="a.txt", content=b"mine", expected_hash=base),
            ]
        )
    assert exc.value.error.category == "stale_reference"
    assert (root / "b.txt").read_text() == "new b.txt"


def test_a_crash_before_the_journal_is_written_leaves_no_backups_behind(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(root)

    def dies(path: Path, text: str) -> None:
        raise Crash(str(path))

    monkeypatch.setattr("actionspace.resources.journal._write_durably", dies)
    with pytest.raises(Crash):
        store.apply_group([GroupWrite(path="a.txt", content=b"new", expected_hash=None)], key="k")
    monkeypatch.undo()
    reopened = FileStore(root)
    assert reopened.recovered == []
    assert (root / "a.txt").read_text() == "alpha"
    assert not reopened.committed("k")
    left = [p.relative_to(root).as_posix() for p in (root / ".actionspace" / "journal").iterdir()]
    assert left == []
