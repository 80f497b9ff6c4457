"""FolderArtifactStore under attack or failure: planted links, a full disk, file permissions."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.discovery import read_artifact_tool
from actionspace.errors import ToolError
from actionspace.observation import FolderArtifactStore, shape
from actionspace.observation._artifacts import artifact_digest

SECRET = b"root:x:0:0:secret\n"


def _plant(store: FolderArtifactStore, target: Path) -> str:
    ref = "artifact://sha256/" + "ab" * 32
    path = store.path_of(ref)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)
    return ref


def test_a_symlink_planted_in_the_folder_is_not_an_artifact(tmp_path: Path) -> None:
    outside = tmp_path / "passwd"
    outside.write_bytes(SECRET)
    store = FolderArtifactStore(tmp_path / "store")
    ref = _plant(store, outside)
    assert not store.exists(ref)
    with pytest.raises(KeyError):
        store.get(ref)
    spec = read_artifact_tool(store)
    assert spec.fn is not None
    with pytest.raises(ToolError) as caught:
        spec.fn(ref=ref)
    assert caught.value.error.category == "invalid_arguments"


def test_a_symlinked_folder_on_the_way_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    digest = "cd" * 32
    (outside / digest[2:]).write_bytes(SECRET)
    store = FolderArtifactStore(tmp_path / "store")
    (tmp_path / "store" / "sha256").mkdir()
    (tmp_path / "store" / "sha256" / digest[:2]).symlink_to(outside, target_is_directory=True)
    ref = "artifact://sha256/" + digest
    assert not store.exists(ref)
    with pytest.raises(KeyError):
        store.open(ref)


def test_a_real_artifact_still_reads_back(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path / "store")
    ref = store.put(b"hello")
    assert store.exists(ref) and store.get(ref) == b"hello"
    mode = stat.S_IMODE(os.stat(store.path_of(ref)).st_mode)
    assert mode & (stat.S_IROTH | stat.S_IWOTH) == 0  # not world readable
    assert store.path_of(ref).name == artifact_digest(ref)[2:]


def _full_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("actionspace.observation._artifacts.os.replace", refuse)


@pytest.mark.parametrize("size", [40_000, 600_000])  # held in memory, and streamed into the store
def test_a_full_disk_leaves_the_observation_without_an_artifact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    store = FolderArtifactStore(tmp_path / "store")
    rt = Runtime("memory://", artifacts=store)

    @rt.tool(name="dump", effect="read")
    def dump(n: int) -> str:
        """A big text."""
        return "line\n" * (size // 5)

    _full_disk(monkeypatch)
    obs = rt.call({"name": "dump", "arguments": {"n": 1}})
    assert obs.ok and obs.error is None
    assert obs.artifact_ref is None and obs.complete is False and obs.trimming is not None
    assert obs.trimming.original_bytes >= size
    assert list((tmp_path / "store" / "tmp").iterdir()) == []  # no partial file left


def _lines() -> Any:
    return ("a\n" for _ in range(200_000))


@pytest.mark.parametrize(
    "make",
    [lambda: "x\n" * 300_000, lambda: b"{" + b"1" * 70_000, lambda: {"rows": ["r" * 100] * 3000}, _lines],
)
def test_shape_survives_a_failing_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Any) -> None:
    value = make()
    store = FolderArtifactStore(tmp_path / "store")
    _full_disk(monkeypatch)
    shaped = shape(
        value, max_bytes=4096, artifacts=store, rule="log-v1" if isinstance(value, str) else "json-v1"
    )
    assert shaped.artifact_ref is None and shaped.complete is False
