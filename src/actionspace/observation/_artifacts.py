"""Content-addressed artifact stores: where the full raw output of a trimmed observation lives.

A reference is ``artifact://sha256/<64 hex digits>``; the digest is of the stored bytes, so
storing the same bytes twice returns the same reference and keeps one copy.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import stat
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO, Final, Protocol, runtime_checkable

__all__ = [
    "ARTIFACT_SCHEME",
    "ArtifactStore",
    "FolderArtifactStore",
    "MemoryArtifactStore",
    "artifact_digest",
    "artifact_ref",
]

ARTIFACT_SCHEME: Final = "artifact://sha256/"
_REF = re.compile(r"artifact://sha256/([0-9a-f]{64})")


def artifact_ref(digest: str) -> str:
    """The reference for a sha256 hex digest."""
    return ARTIFACT_SCHEME + digest


def artifact_digest(ref: str) -> str:
    """The sha256 hex digest inside ``ref``; raises ``ValueError`` when ``ref`` is malformed."""
    match = _REF.fullmatch(ref) if isinstance(ref, str) else None
    if match is None:
        raise ValueError(f"not an artifact reference: {ref!r}")
    return match.group(1)


@runtime_checkable
class ArtifactStore(Protocol):
    """Where raw tool output is kept, by content.

    ``get`` and ``open`` raise ``KeyError`` for a reference that is not stored and ``ValueError``
    for a string that is not a reference at all.
    """

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its reference. Idempotent."""
        ...

    def put_stream(self, chunks: Iterable[bytes]) -> str:
        """Store the concatenation of ``chunks`` without holding it in memory; returns its reference."""
        ...

    def open(self, ref: str) -> BinaryIO:
        """A binary file object over the stored bytes; the caller closes it."""
        ...

    def get(self, ref: str) -> bytes:
        """All stored bytes of ``ref``."""
        ...

    def exists(self, ref: str) -> bool:
        """Whether ``ref`` is stored (False for malformed references too)."""
        ...


class MemoryArtifactStore:
    """Artifacts in a dict; for tests and for runs that keep nothing on disk."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        blob = bytes(data)
        digest = hashlib.sha256(blob).hexdigest()
        with self._lock:
            self._blobs.setdefault(digest, blob)
        return artifact_ref(digest)

    def put_stream(self, chunks: Iterable[bytes]) -> str:
        # one growing buffer, handed over without a copy: never the chunks and their join at once
        buffer = io.BytesIO()
        for chunk in chunks:
            buffer.write(chunk)
        return self.put(buffer.getvalue())

    def open(self, ref: str) -> BinaryIO:
        return io.BytesIO(self.get(ref))

    def get(self, ref: str) -> bytes:
        digest = artifact_digest(ref)
        with self._lock:
            blob = self._blobs.get(digest)
        if blob is None:
            raise KeyError(ref)
        return blob

    def exists(self, ref: str) -> bool:
        try:
            digest = artifact_digest(ref)
        except ValueError:
            return False
        with self._lock:
            return digest in self._blobs

    def __len__(self) -> int:
        with self._lock:
            return len(self._blobs)


class FolderArtifactStore:
    """Artifacts as files under ``root/sha256/<first 2 hex>/<remaining 62 hex>``.

    Writes go to a temporary file in ``root/tmp`` that is renamed into place (``os.replace``) once
    complete, so a reader never sees a partial artifact under its final name, and concurrent
    writers of the same bytes (threads or processes) are harmless. ``durable=True`` fsyncs each
    file before the rename (default False: an artifact is a copy of output the trace already
    points at, not the record of truth).
    """

    def __init__(self, root: str | os.PathLike[str], *, durable: bool = False) -> None:
        self.root = Path(root)
        self._durable = durable
        self._tmp = self.root / "tmp"
        self._tmp.mkdir(parents=True, exist_ok=True)

    def path_of(self, ref: str) -> Path:
        """Where ``ref`` is (or would be) stored."""
        digest = artifact_digest(ref)
        return self.root / "sha256" / digest[:2] / digest[2:]

    def put(self, data: bytes) -> str:
        return self.put_stream((data,))

    def put_stream(self, chunks: Iterable[bytes]) -> str:
        hasher = hashlib.sha256()
        fd, tmp_name = tempfile.mkstemp(dir=self._tmp, prefix="put-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    hasher.update(chunk)
                    out.write(chunk)
                if self._durable:
                    out.flush()
                    os.fsync(out.fileno())
            ref = artifact_ref(hasher.hexdigest())
            final = self.path_of(ref)
            if final.exists():
                os.unlink(tmp_name)
            else:
                final.parent.mkdir(parents=True, exist_ok=True)
                os.replace(tmp_name, final)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_name)
            raise
        return ref

    def open(self, ref: str) -> BinaryIO:
        """The stored file; a symlink (of the file or of a folder on its way) or anything but a
        regular file under ``root`` is not an artifact, so a planted link never reads elsewhere."""
        path = self.path_of(ref)
        if not self._inside(path):
            raise KeyError(ref)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
        except OSError:  # missing, a symlink (ELOOP), unreadable
            raise KeyError(ref) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise KeyError(ref)
        return os.fdopen(fd, "rb")

    def _inside(self, path: Path) -> bool:
        store = os.path.realpath(self.root / "sha256")
        return os.path.realpath(path.parent).startswith(store + os.sep)

    def get(self, ref: str) -> bytes:
        with self.open(ref) as stream:
            return stream.read()

    def exists(self, ref: str) -> bool:
        try:
            path = self.path_of(ref)
        except ValueError:
            return False
        return path.is_file() and not path.is_symlink() and self._inside(path)
