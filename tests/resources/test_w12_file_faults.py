"""FileStore under hostile paths and a failing disk: typed errors only, nothing half written."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace.errors import ToolError
from actionspace.resources import Append, Conditional, FileStore, FileSwitchEnvironment, GroupWrite, Overwrite
from actionspace.resources.journal import TEMP_SUFFIX


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("alpha")
    (tmp_path / "dir").mkdir()
    return tmp_path


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(TEMP_SUFFIX) or p.suffix in (".bak", ".json")]


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".actionspace" not in p.parts
    }


BAD_PATHS = [
    "\ud800.txt",  # a lone surrogate: no file name can hold it
    "a" * 300,  # longer than a file name may be
    "d/" * 3000 + "x",  # longer than a path may be
    "a.txt/inside",  # a file used as a directory
    "dir",  # a directory
    "missing/x.txt",  # a directory that does not exist
]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_a_path_no_file_can_have_is_invalid_arguments_for_every_operation(root: Path, path: str) -> None:
    store = FileStore(root)
    before = _files(root)
    operations: dict[str, Callable[[], Any]] = {
        "read": lambda: store.read(path),
        "overwrite": lambda: store.write(path, "x", mode=Overwrite()),
        "conditional": lambda: store.write(path, "x", mode=Conditional(content_hash="absent")),
        "append": lambda: store.write(path, "x", mode=Append()),
        "group": lambda: store.apply_group([GroupWrite(path=path, content=b"x", expected_hash=None)]),
        "check": lambda: store.check({path: "absent"}),
        "stage": lambda: FileSwitchEnvironment(store).begin("k").stage(path, "x", expected_hash="absent"),
    }
    if path == "missing/x.txt":  # absent indeed: a check or a stage of "must not exist" holds
        assert operations.pop("check")() == {}
        operations.pop("stage")()
    for name, operation in operations.items():
        with pytest.raises(ToolError) as exc:
            operation()
        assert exc.value.error.category == "invalid_arguments", (name, exc.value.error)
    assert _files(root) == before and _leftovers(root) == []


def test_a_name_that_fits_but_whose_temporary_would_not_is_invalid_and_leaves_nothing(root: Path) -> None:
    store = FileStore(root)
    name = "n" * 250  # a valid file name; its temporary (".<name>.<12 hex>.as-tmp") is not
    with pytest.raises(ToolError) as exc:
        store.write(name, "x", mode=Overwrite())
    assert exc.value.error.category == "invalid_arguments"
    assert not (root / name).exists() and _leftovers(root) == []


def _failing_fsync(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    def fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.mark.parametrize(
    ("code", "category"),
    [
        (errno.ENOSPC, "transient"),
        (errno.EDQUOT, "transient"),
        (errno.EACCES, "permanent"),
        (errno.EROFS, "permanent"),
        (errno.EIO, "unclassified"),
    ],
)
def test_a_refused_write_is_typed_by_its_errno_and_leaves_the_file_and_no_temporary(
    root: Path, monkeypatch: pytest.MonkeyPatch, code: int, category: str
) -> None:
    store = FileStore(root)
    _failing_fsync(monkeypatch, code)
    writes: dict[str, Callable[[], Any]] = {
        "overwrite": lambda: store.write("a.txt", "new", mode=Overwrite()),
        "create": lambda: store.write("b.txt", "new", mode=Conditional(content_hash="absent")),
        "group": lambda: store.apply_group([GroupWrite(path="a.txt", content=b"new", expected_hash=None)]),
    }
    for name, write in writes.items():
        with pytest.raises(ToolError) as exc:
            write()
        assert exc.value.error.category == category, (name, exc.value.error)
        assert exc.value.error.vendor_code == errno.errorcode[code]
        assert exc.value.error.retryable is (category == "transient")
    monkeypatch.undo()
    assert _files(root) == {"a.txt": b"alpha"} and _leftovers(root) == []


def test_an_append_cut_short_by_a_full_disk_is_taken_back(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(root)
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:
        if len(data) > 1:
            return real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(ToolError) as exc:
        store.write("a.txt", "-appended", mode=Append())
    monkeypatch.undo()
    assert exc.value.error.category == "transient"
    assert (root / "a.txt").read_bytes() == b"alpha"


def test_a_short_write_of_an_append_is_completed(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = FileStore(root)
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    after = store.write("a.txt", "-appended", mode=Append())
    monkeypatch.undo()
    assert (root / "a.txt").read_bytes() == b"alpha-appended" == after.content


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes whatever the permissions say")
def test_a_file_the_process_may_not_read_or_write_is_a_typed_refusal(root: Path) -> None:
    store = FileStore(root)
    (root / "a.txt").chmod(0)
    (root / "dir").chmod(0o500)
    try:
        operations: tuple[Callable[[], Any], ...] = (
            lambda: store.read("a.txt"),
            lambda: store.write("dir/new.txt", "x", mode=Overwrite()),
            lambda: store.write("a.txt", "x", mode=Append()),
        )
        for operation in operations:
            with pytest.raises(ToolError) as exc:
                operation()
            assert exc.value.error.category == "permanent"
            assert exc.value.error.vendor_code in ("EACCES", "EPERM")
    finally:
        (root / "a.txt").chmod(0o644)
        (root / "dir").chmod(0o755)
    assert _files(root) == {"a.txt": b"alpha"}


def test_a_directory_swapped_for_a_symlink_out_of_the_root_is_refused_at_read(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("secret")
    store = FileStore(root)
    (root / "dir").rmdir()
    (root / "dir").symlink_to(outside)
    with pytest.raises(ToolError) as exc:
        store.read("dir/secret.txt")
    assert exc.value.error.category == "invalid_arguments"
    with pytest.raises(ToolError):
        store.write("dir/secret.txt", "mine", mode=Overwrite())
    assert (outside / "secret.txt").read_text() == "secret"


def test_staging_one_file_under_two_spellings_keeps_the_last(root: Path) -> None:
    store = FileStore(root)
    switch = FileSwitchEnvironment(store).begin("k-spellings")
    switch.stage("a.txt", "first", expected_hash=None)
    switch.stage("./dir/../a.txt", "second", expected_hash=None)
    switch.commit()
    assert (root / "a.txt").read_text() == "second"
    assert store.committed("k-spellings")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.text(min_size=0, max_size=300), content=st.binary(max_size=64))
def test_any_path_text_is_written_inside_the_root_or_refused_with_a_type(
    root: Path, path: str, content: bytes
) -> None:
    store = FileStore(root)
    try:
        written = store.write(path, content, mode=Overwrite())
    except ToolError as exc:
        assert exc.error.category in ("invalid_arguments", "permanent"), exc.error
    else:
        target = (root / written.path).resolve()
        assert target.is_relative_to(root.resolve()) and target.read_bytes() == content
        target.unlink()
    assert (root / "a.txt").read_bytes() == b"alpha" and _leftovers(root) == []
