from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actionspace.observation import ArtifactStore, FolderArtifactStore, MemoryArtifactStore


@pytest.fixture(params=["memory", "folder"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "memory":
        return MemoryArtifactStore()
    return FolderArtifactStore(tmp_path / "artifacts")


def test_both_stores_satisfy_the_protocol(store: ArtifactStore) -> None:
    assert isinstance(store, ArtifactStore)


def test_ref_is_the_sha256_of_the_bytes(store: ArtifactStore) -> None:
    ref = store.put(b"hello")
    assert ref == "artifact://sha256/" + hashlib.sha256(b"hello").hexdigest()
    assert store.get(ref) == b"hello"
    assert store.exists(ref)


def test_put_is_idempotent(store: ArtifactStore, tmp_path: Path) -> None:
    first = store.put(b"same bytes")
    second = store.put(b"same bytes")
    assert first == second
    assert store.get(first) == b"same bytes"
    if isinstance(store, FolderArtifactStore):
        assert len([p for p in (tmp_path / "artifacts" / "sha256").rglob("*") if p.is_file()]) == 1


def test_stream_put_equals_bytes_put(store: ArtifactStore) -> None:
    data = bytes(range(256)) * 1000
    chunks = (data[i : i + 999] for i in range(0, len(data), 999))
    assert store.put_stream(chunks) == store.put(data)
    with store.open(store.put(data)) as stream:
        assert stream.read() == data


def test_empty_artifact_is_stored(store: ArtifactStore) -> None:
    ref = store.put_stream(iter(()))
    assert ref.endswith(hashlib.sha256(b"").hexdigest())
    assert store.get(ref) == b""


def test_get_of_a_missing_ref_raises_key_error(store: ArtifactStore) -> None:
    missing = "artifact://sha256/" + "0" * 64
    assert not store.exists(missing)
    with pytest.raises(KeyError):
        store.get(missing)
    with pytest.raises(KeyError):
        store.open(missing)


def test_a_string_that_is_not_a_ref_is_a_value_error(store: ArtifactStore) -> None:
    assert not store.exists("artifact://md5/abc")
    with pytest.raises(ValueError, match="not an artifact reference"):
        store.get("artifact://sha256/../../etc/passwd")


def test_folder_store_lays_files_out_by_digest_prefix(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path)
    ref = store.put(b"layout")
    digest = hashlib.sha256(b"layout").hexdigest()
    assert store.path_of(ref) == tmp_path / "sha256" / digest[:2] / digest[2:]
    assert store.path_of(ref).read_bytes() == b"layout"


def test_a_partial_write_is_never_visible_under_the_final_name(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path)
    data = b"x" * 100_000
    final = store.path_of("artifact://sha256/" + hashlib.sha256(data).hexdigest())
    seen: list[tuple[bool, int]] = []

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(data), 10_000):
            seen.append((final.exists(), len(list((tmp_path / "tmp").iterdir()))))
            yield data[start : start + 10_000]

    store.put_stream(chunks())
    assert seen == [(False, 1)] * 10
    assert final.read_bytes() == data
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_failed_stream_leaves_no_file_behind(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path)

    def chunks() -> Iterator[bytes]:
        yield b"first part"
        raise OSError("pipe closed")

    with pytest.raises(OSError, match="pipe closed"):
        store.put_stream(chunks())
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "sha256").exists()


def test_concurrent_writers_of_the_same_bytes_agree(tmp_path: Path) -> None:
    store = FolderArtifactStore(tmp_path)
    data = b"shared" * 50_000
    refs: list[str] = []
    threads = [threading.Thread(target=lambda: refs.append(store.put(data))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(refs)) == 1
    assert store.get(refs[0]) == data
    assert list((tmp_path / "tmp").iterdir()) == []
