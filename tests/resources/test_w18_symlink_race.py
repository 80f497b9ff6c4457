"""FileStore never follows a symlink: not one placed beforehand, not one swapped in while it works.

The race tests swap a directory of the resource path for a symlink out of the root at the first
file system open a store operation makes after its checks begin (the lock file aside), so the swap
lands between whatever check the store makes and the open or rename that follows it.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.errors import ConfigurationError, ToolError
from actionspace.resources import (
    Append,
    Conditional,
    FileStore,
    FileSwitchEnvironment,
    GroupWrite,
    Overwrite,
    sha256_hex,
)
from actionspace.resources.journal import TEMP_SUFFIX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = tmp_path / "root"
    base.mkdir()
    (base / "dir").mkdir()
    (base / "dir" / "secret.txt").write_text("inside")
    (base / "a.txt").write_text("alpha")
    return base


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    away = tmp_path / "outside"
    away.mkdir()
    (away / "secret.txt").write_text("outside secret")
    return away


def _outside_state(outside: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in outside.iterdir()}


@pytest.fixture
def swap_on_first_open(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[], None]]:
    """Arms a hook: the first open after arming (the lock file aside) swaps ``root/dir`` for a symlink
    to ``outside`` (the real directory moves to ``root/dir-moved``, still inside the root)."""
    armed = [False]
    real_os_open, real_open = os.open, builtins.open

    def swap(path: Any) -> None:
        name = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
        if not armed[0] or name == "lock" or name.endswith(f"{os.sep}lock"):
            return
        armed[0] = False
        os.rename(root / "dir", root / "dir-moved")
        os.symlink(outside, root / "dir")

    def hooked_os_open(path: Any, *args: Any, **kwargs: Any) -> int:
        swap(path)
        return real_os_open(path, *args, **kwargs)

    def hooked_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        swap(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", hooked_os_open)
    monkeypatch.setattr(builtins, "open", hooked_open)

    def arm() -> None:
        armed[0] = True

    yield arm
    armed[0] = False


OPERATIONS: dict[str, Callable[[FileStore], Any]] = {
    "read": lambda s: s.read("dir/secret.txt"),
    "overwrite": lambda s: s.write("dir/secret.txt", "mine", mode=Overwrite()),
    "create": lambda s: s.write("dir/new.txt", "mine", mode=Conditional(content_hash="absent")),
    "conditional": lambda s: s.write(
        "dir/secret.txt", "mine", mode=Conditional(content_hash=sha256_hex(b"inside"))
    ),
    "append": lambda s: s.write("dir/secret.txt", "-mine", mode=Append()),
    "group": lambda s: s.apply_group(
        [
            GroupWrite(path="a.txt", content=b"A", expected_hash=None),
            GroupWrite(path="dir/secret.txt", content=b"mine", expected_hash=None),
        ]
    ),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_a_directory_swapped_for_a_symlink_mid_operation_never_sends_io_out_of_the_root(
    root: Path, outside: Path, swap_on_first_open: Callable[[], None], operation: str
) -> None:
    store = FileStore(root)
    before = _outside_state(outside)
    swap_on_first_open()
    try:
        result = OPERATIONS[operation](store)
    except ToolError as exc:
        assert exc.error.category == "invalid_arguments", exc.error
    else:
        if operation == "read":
            assert result.content == b"inside"  # the directory the store opened, never the link's target
    assert _outside_state(outside) == before
    assert not [p for p in outside.iterdir() if p.name.endswith(TEMP_SUFFIX)]


def test_a_symlinked_directory_inside_the_root_is_refused_not_followed(root: Path) -> None:
    (root / "alias").symlink_to(root / "dir")
    store = FileStore(root)
    operations: tuple[Callable[[], Any], ...] = (
        lambda: store.read("alias/secret.txt"),
        lambda: store.write("alias/secret.txt", "mine", mode=Overwrite()),
        lambda: store.write("alias/secret.txt", "mine", mode=Append()),
    )
    for operation in operations:
        with pytest.raises(ToolError) as exc:
            operation()
        assert exc.value.error.category == "invalid_arguments"
        assert "escapes the root" in exc.value.error.message
    assert (root / "dir" / "secret.txt").read_text() == "inside"


def test_a_symlink_as_the_file_itself_is_refused_for_reads_and_writes(root: Path, outside: Path) -> None:
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "inner.txt").symlink_to(root / "a.txt")
    store = FileStore(root)
    for name in ("link.txt", "inner.txt"):
        operations: tuple[Callable[[str], Any], ...] = (
            lambda n: store.read(n),
            lambda n: store.write(n, "mine", mode=Overwrite()),
            lambda n: store.write(n, "mine", mode=Append()),
            lambda n: store.apply_group([GroupWrite(path=n, content=b"mine", expected_hash=None)]),
            lambda n: FileSwitchEnvironment(store).begin("k").stage(n, "x", expected_hash="absent"),
        )
        for operation in operations:
            with pytest.raises(ToolError) as exc:
                operation(name)
            assert exc.value.error.category == "invalid_arguments", name
    assert (outside / "secret.txt").read_text() == "outside secret"
    assert (root / "a.txt").read_text() == "alpha" and (root / "link.txt").is_symlink()


def test_a_state_directory_swapped_for_a_symlink_is_never_written_through(root: Path, outside: Path) -> None:
    FileStore(root)
    state = root / ".actionspace"
    os.rename(state, root / "state-moved")
    os.symlink(outside, state)
    with pytest.raises((ToolError, ConfigurationError)):
        FileStore(root).apply_group([GroupWrite(path="a.txt", content=b"A", expected_hash=None)], key="k")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (root / "a.txt").read_text() == "alpha"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(
        st.sampled_from(["dir", "out", "alias", "..", ".", "", "secret.txt", "n.txt"]), max_size=6
    ),
    mode=st.sampled_from(["read", "overwrite", "append", "group"]),
)
def test_no_path_through_links_reaches_outside_the_root(tmp_path: Path, parts: list[str], mode: str) -> None:
    base = tmp_path / "hyp"
    if not base.exists():
        base.mkdir()
        (base / "root").mkdir()
        (base / "root" / "dir").mkdir()
        (base / "outside").mkdir()
        (base / "outside" / "secret.txt").write_text("outside secret")
        (base / "root" / "out").symlink_to(base / "outside")
        (base / "root" / "alias").symlink_to(base / "root" / "dir")
    store = FileStore(base / "root")
    path = "/".join(parts)
    operations: dict[str, Callable[[], Any]] = {
        "read": lambda: store.read(path),
        "overwrite": lambda: store.write(path, "mine", mode=Overwrite()),
        "append": lambda: store.write(path, "mine", mode=Append()),
        "group": lambda: store.apply_group([GroupWrite(path=path, content=b"mine", expected_hash=None)]),
    }
    try:
        found = operations[mode]()
    except ToolError as exc:
        assert exc.error.category == "invalid_arguments", exc.error
    else:
        versions = found if isinstance(found, tuple) else (found,)
        for version in versions:
            assert version.path.split("/")[0] not in ("out", "alias")  # the links live at the top
    assert sorted(p.name for p in (base / "outside").iterdir()) == ["secret.txt"]
    assert (base / "outside" / "secret.txt").read_text() == "outside secret"
