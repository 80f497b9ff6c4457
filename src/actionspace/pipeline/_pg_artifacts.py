"""Artifacts in PostgreSQL: the full outputs of trimmed results, readable by every process sharing
the store.

A run continued by another process (another worker, a restart, another host) offers
``read_artifact`` for the artifacts its model was shown, so they must be where that process
reads: kept in the memory of the process that shaped the result, they were gone with it.

An artifact is stored as chunks of :data:`CHUNK` bytes (table ``actionspace_artifact_chunks``)
and one row naming its size (``actionspace_artifacts``), written in one transaction: a reader
never sees part of one. The same bytes stored by two processes at once are kept once.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
from collections.abc import Iterable
from typing import Any, BinaryIO, Final

from actionspace.ledger.postgres_pool import PostgresConnections
from actionspace.observation._artifacts import artifact_digest, artifact_ref

__all__ = ["CHUNK", "PostgresArtifactStore"]

CHUNK: Final = 1 << 20
"""Bytes per stored chunk: a read of a range fetches the chunks it covers, not the artifact."""
_SPOOL: Final = 8 * CHUNK
"""An artifact handed in as a stream is held in memory up to this size, then in a temporary file."""
SCHEMA_VERSION: Final = 1


class PostgresArtifactStore:
    """Content-addressed artifacts in PostgreSQL (an :class:`~actionspace.observation.ArtifactStore`)."""

    remote = True
    """Its reads wait on the network."""

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        self._db = PostgresConnections(
            url, name="artifacts", min_size=0, max_size=2, connect_timeout_s=connect_timeout_s
        )  # connected while used: most runs trim nothing
        try:
            self._db.init_schema(
                (
                    "CREATE TABLE IF NOT EXISTS actionspace_artifacts_meta"
                    " (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS actionspace_artifacts"
                    " (digest TEXT PRIMARY KEY, size BIGINT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS actionspace_artifact_chunks"
                    " (digest TEXT NOT NULL, n INTEGER NOT NULL, chunk BYTEA NOT NULL,"
                    " PRIMARY KEY (digest, n))",
                ),
                meta_table="actionspace_artifacts_meta",
                meta_key="schema_version",
                version=SCHEMA_VERSION,
                what="the artifact store",
            )
        except BaseException:
            self._db.close()
            raise

    def put(self, data: bytes) -> str:
        return self.put_stream((bytes(data),))

    def put_stream(self, chunks: Iterable[bytes]) -> str:
        hasher, size = hashlib.sha256(), 0
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as spool:  # bounded memory, any size
            for chunk in chunks:
                hasher.update(chunk)
                spool.write(chunk)
                size += len(chunk)
            digest = hasher.hexdigest()
            if self._stored_size(digest) is None:
                spool.seek(0)
                self._write(digest, size, spool)
        return artifact_ref(digest)

    def _write(self, digest: str, size: int, source: Any) -> None:
        """All chunks of ``digest`` and its row, in one transaction (kept once if stored meanwhile)."""
        with self._db.transaction() as conn:
            n = 0
            while piece := source.read(CHUNK):
                conn.execute(
                    "INSERT INTO actionspace_artifact_chunks (digest, n, chunk) VALUES (%s, %s, %s)"
                    " ON CONFLICT (digest, n) DO NOTHING",
                    (digest, n, piece),
                )
                n += 1
            conn.execute(
                "INSERT INTO actionspace_artifacts (digest, size) VALUES (%s, %s)"
                " ON CONFLICT (digest) DO NOTHING",
                (digest, size),
            )

    def _stored_size(self, digest: str) -> int | None:
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT size FROM actionspace_artifacts WHERE digest = %s", (digest,)
            ).fetchone()
        return None if row is None else int(row["size"])

    def chunk(self, digest: str, n: int) -> bytes:
        """The ``n``-th chunk of a stored artifact (``b""`` past its end)."""
        with self._db.connection() as conn:
            row = conn.execute(
                "SELECT chunk FROM actionspace_artifact_chunks WHERE digest = %s AND n = %s", (digest, n)
            ).fetchone()
        return b"" if row is None else bytes(row["chunk"])

    def open(self, ref: str) -> BinaryIO:
        digest = artifact_digest(ref)
        size = self._stored_size(digest)
        if size is None:
            raise KeyError(ref)
        return io.BufferedReader(_Chunks(self, digest, size), buffer_size=CHUNK)

    def get(self, ref: str) -> bytes:
        with self.open(ref) as stream:
            return stream.read()

    def exists(self, ref: str) -> bool:
        try:
            digest = artifact_digest(ref)
        except ValueError:
            return False
        return self._stored_size(digest) is not None

    def close(self) -> None:
        self._db.close()


class _Chunks(io.RawIOBase):
    """A stored artifact read chunk by chunk, seekable: a range reads only the chunks it covers."""

    def __init__(self, store: PostgresArtifactStore, digest: str, size: int) -> None:
        self._store, self._digest, self._size = store, digest, size
        self._pos = 0
        self._held: tuple[int, bytes] = (-1, b"")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._size:
            return 0
        n, within = divmod(self._pos, CHUNK)
        if self._held[0] != n:
            self._held = (n, self._store.chunk(self._digest, n))
        piece = self._held[1][within : within + len(buffer)]
        buffer[: len(piece)] = piece
        self._pos += len(piece)
        return len(piece)
