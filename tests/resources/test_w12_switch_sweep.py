"""A group switch failing (an OSError) or dying (SIGKILL) at every file system step it takes.

Whatever the step, the store reopened afterwards holds every file old or every file new, says
``committed(key)`` exactly when they are new, and keeps no temporary, backup or journal.
"""

from __future__ import annotations

import errno
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace.errors import ToolError
from actionspace.resources import FileStore, GroupWrite, sha256_hex
from actionspace.resources.journal import TEMP_SUFFIX

OLD = {"a.txt": b"alpha", "b.txt": b"beta"}
NEW = {"a.txt": b"ALPHA", "b.txt": b"BETA", "c.txt": b"GAMMA"}
STEPS = ("replace", "fsync", "link", "unlink")


def _seed(root: Path) -> None:
    for name, data in OLD.items():
        (root / name).write_bytes(data)


def _writes() -> list[GroupWrite]:
    return [
        GroupWrite(path=name, content=data, expected_hash=sha256_hex(OLD[name]) if name in OLD else "absent")
        for name, data in NEW.items()
    ]


def _instrument(monkeypatch: pytest.MonkeyPatch, at: int, action: Callable[[], None]) -> list[int]:
    """Run ``action`` instead of the ``at``-th file system step (counting from 1); 0 = never."""
    seen = [0]
    for step in STEPS:
        real = getattr(os, step)

        def wrapped(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            seen[0] += 1
            if seen[0] == at:
                action()
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, step, wrapped)
    return seen


def _state(root: Path) -> dict[str, bytes]:
    return {name: (root / name).read_bytes() for name in NEW if (root / name).exists()}


def _settled(root: Path) -> None:
    store = FileStore(root)
    state = _state(root)
    assert state in (OLD, NEW), state
    assert store.committed("group-1") is (state == NEW)
    assert _leftovers(root) == []


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX) or p.suffix in (".bak", ".json")]


def _steps_of_a_clean_switch(tmp_path: Path) -> int:
    root = tmp_path / "count"
    root.mkdir()
    _seed(root)
    store = FileStore(root)
    with pytest.MonkeyPatch.context() as mp:
        seen = _instrument(mp, 0, lambda: None)
        store.apply_group(_writes(), key="group-1")
    return seen[0]


def test_an_os_error_at_any_step_of_a_switch_is_typed_and_leaves_all_old_or_all_new(tmp_path: Path) -> None:
    total = _steps_of_a_clean_switch(tmp_path)
    assert total > 8
    for at in range(1, total + 1):
        root = tmp_path / f"fail{at}"
        root.mkdir()
        _seed(root)
        store = FileStore(root)

        def fail() -> None:
            raise OSError(errno.EIO, "Input/output error")

        with pytest.MonkeyPatch.context() as mp:
            _instrument(mp, at, fail)
            try:
                store.apply_group(_writes(), key="group-1")
            except ToolError as exc:
                assert exc.error.category in ("unclassified", "transient"), (at, exc.error)
                assert _state(root) == OLD, at  # refused: nothing switched, at once
            else:
                assert _state(root) == NEW, at  # finished: every file switched, at once
        assert _leftovers(root) == [], at  # nothing behind, before any reopening
        _settled(root)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_crash_at_any_step_of_a_switch_is_repaired_to_all_old_or_all_new(tmp_path: Path) -> None:
    total = _steps_of_a_clean_switch(tmp_path)
    for at in range(1, total + 1):
        root = tmp_path / f"crash{at}"
        root.mkdir()
        _seed(root)
        pid = os.fork()
        if pid == 0:  # the child dies at step ``at``; os._exit so no pytest machinery runs in it
            try:
                store = FileStore(root)
                with pytest.MonkeyPatch.context() as mp:
                    _instrument(mp, at, lambda: os.kill(os.getpid(), signal.SIGKILL))
                    store.apply_group(_writes(), key="group-1")
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0
        _settled(root)
