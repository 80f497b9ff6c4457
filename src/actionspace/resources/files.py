"""Hash-checked file operations confined to a root directory.

``FileStore(root)`` reads a file as a :class:`FileVersion` (content, sha256 hash, version token)
and writes it in one of the write modes of :mod:`actionspace.resources.modes`. Every write goes to
a temporary in the same directory, is fsynced and switched in with ``os.replace``, so readers
never see a partly written file. :meth:`FileStore.apply_group` switches several files
all-or-nothing (see :mod:`actionspace.resources.journal` for what "atomic" means there).

Writers of this store (in this or any other process) serialize on an advisory lock file
(``<root>/.actionspace/lock``); a snapshot takes it shared. Editors that do not use the store are
not excluded, which is exactly what the hash checks are for.

Paths are relative to the root (an absolute path naming a file below it is accepted too) and
normalized lexically (``.`` dropped, ``..`` taken back, never above the root). They are then opened
one directory at a time relative to the descriptor of the one before, never following a symlink
(:mod:`actionspace.resources._beneath`): a symlink anywhere in a path, even one pointing inside the
root, is ``invalid_arguments`` ("escapes the root"), and so is a path escaping the root, naming the
state directory or a temporary, or longer than a path may be. A FIFO, socket or device is refused
as "not a regular file", never opened in a way that waits. Annotate tool arguments with
``actionspace.validation.semantic.PathWithin`` so escapes are rejected at validation already.

A refusal of the file system is a :class:`~actionspace.errors.ToolError` too (see
:mod:`actionspace.resources._os_errors`), and a failed write leaves the file as it was: no
temporary behind, an append cut short taken back.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from actionspace.errors import ToolError
from actionspace.resources._beneath import (
    Beneath,
    components,
    escaped,
    hash_at,
    lstat_at,
    read_at,
    refuse_link,
    write_all,
    write_new,
)
from actionspace.resources._os_errors import os_errors
from actionspace.resources.journal import STATE_DIR, TEMP_SUFFIX, Journal, Recovered, RenameStep, Staged
from actionspace.resources.modes import (
    ABSENT,
    LATEST,
    Append,
    AtVersion,
    Conditional,
    ReadMode,
    WriteMode,
    conflict,
    sha256_hex,
    stale,
    version_matches,
)

__all__ = ["STATE_DIR", "FileSnapshot", "FileStore", "FileVersion", "GroupWrite"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FileVersion:
    """One read (or the result of one write) of a file."""

    path: str
    """Relative to the store's root."""
    content: bytes
    hash: str
    """sha256 hex of ``content``: what a conditional write compares."""
    version: str
    """Token of this file generation (inode, size, mtime in ns); changes with every switch."""

    @property
    def text(self) -> str:
        return self.content.decode("utf-8")


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupWrite:
    """One file of :meth:`FileStore.apply_group`."""

    path: str
    content: bytes
    expected_hash: str | None
    """The hash the caller based this write on (:data:`ABSENT` = must not exist); None = overwrite."""


@dataclass(slots=True)
class FileSnapshot:
    """Reads under the shared lock: no store writer switches anything while it is open."""

    store: FileStore
    versions: dict[str, str] = field(default_factory=dict)
    """Path → hash of every file read through this snapshot."""

    def read(self, path: str) -> FileVersion:
        found = self.store._read_unlocked(path, LATEST)
        self.versions[found.path] = found.hash
        return found


class FileStore:
    """Files under ``root``; see the module docstring.

    ``lock_timeout_s``: how long a writer waits for another writer before giving up with
    ``conflict`` (seconds, default 5). ``between_renames``: called before every rename after the
    first one of a group switch (for crash tests); raising from it interrupts the switch.
    Opening a store recovers any switch a crash interrupted (:attr:`recovered`), and so does every
    write that finds one (a crash of another process after this store was opened). A journal that
    cannot be judged is quarantined (see :mod:`actionspace.resources.journal`); the write that
    finds one fails once with ``conflict`` (re-read, then write again), an open records it only.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        lock_timeout_s: float = 5.0,
        between_renames: Callable[[RenameStep], None] | None = None,
    ) -> None:
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise FileNotFoundError(f"file store root {self.root} is not a directory")
        self.lock_timeout_s = lock_timeout_s
        self.between_renames = between_renames
        self._spellings = (self.root, Path(os.path.abspath(root)))
        self._tree = Beneath(self.root)
        self._journal = Journal(self._tree)
        self.recovered: list[Recovered] = self.recover()

    # ------------------------------------------------------------------ reading
    def read(self, path: str, *, mode: ReadMode = LATEST) -> FileVersion:
        """The file now (``Latest``) or at a version token or hash (``AtVersion``).

        A file only has its current version: ``AtVersion`` of anything else raises
        ``ToolError("stale_reference", current_version=<current hash>)``; a missing file raises
        ``ToolError("invalid_arguments")``.
        """
        with self._locked(exclusive=False):
            return self._read_unlocked(path, mode)

    @contextmanager
    def snapshot(self) -> Iterator[FileSnapshot]:
        """Several reads that see one consistent version set (no store writer runs meanwhile).

        Holds the shared lock while open: a write from inside the block waits ``lock_timeout_s``
        and fails with ``conflict``; read, leave the block, then write conditionally.
        """
        with self._locked(exclusive=False):
            yield FileSnapshot(self)

    def _read_unlocked(self, path: str, mode: ReadMode) -> FileVersion:
        parts = self._parts(path)
        rel = "/".join(parts)
        try:
            with os_errors(rel), self._tree.parent(parts) as pfd:
                found = _version(pfd, parts[-1], rel)
        except ToolError as exc:
            if not isinstance(exc.__cause__, (FileNotFoundError, IsADirectoryError)):
                raise
            raise ToolError("invalid_arguments", f"no file {path!r}", resource_ids=[f"file:{path}"]) from None
        if isinstance(mode, AtVersion) and str(mode.version) not in (found.hash, found.version):
            raise stale(f"file:{found.path}", f"{path} is no longer at {mode.version}", found.hash)
        return found

    # ------------------------------------------------------------------ writing
    def write(self, path: str, content: bytes | str, *, mode: WriteMode) -> FileVersion:
        """Write one file in ``mode``; returns what is on disk afterwards.

        ``Conditional``: checked before the temporary is written (mismatch → ``stale_reference``
        with the current hash) and again just before the switch (a change in between, by an
        editor outside the store → ``conflict``).
        """
        data = content.encode("utf-8") if isinstance(content, str) else content
        parts = self._parts(path)
        rel, name = "/".join(parts), parts[-1]
        with self._writing(), os_errors(rel), self._tree.parent(parts) as pfd:
            _refuse_non_file(pfd, name, rel)
            if isinstance(mode, Append):
                return _append(pfd, name, rel, data)
            if isinstance(mode, Conditional):
                self._check(pfd, name, rel, mode)
            temp = _temp(pfd, name, data)
            try:
                if isinstance(mode, Conditional) and not _matches(pfd, name, rel, mode):
                    raise conflict(
                        f"file:{rel}",
                        f"{path} changed while it was being written",
                        current_hash=hash_at(pfd, name, rel),
                    )
                os.replace(temp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=pfd)
            os.fsync(pfd)
            return _version(pfd, name, rel)

    def apply_group(self, writes: Sequence[GroupWrite], *, key: str | None = None) -> tuple[FileVersion, ...]:
        """Switch every file of ``writes`` or none (module docstring of ``journal``).

        Every temporary is written first, then every ``expected_hash`` is checked; one mismatch
        raises ``stale_reference`` (``details["mismatched"]``: path → current hash) and nothing is
        switched. ``key`` is recorded with the switch for :meth:`committed`.
        """
        targets = [self._parts(w.path) for w in writes]
        rels = ["/".join(parts) for parts in targets]
        if len(set(rels)) != len(rels):
            raise ToolError("invalid_arguments", "a switch group names the same file twice")
        with self._writing(), os_errors(", ".join(rels)):
            staged: list[Staged] = []
            switching = False
            try:
                for w, parts, rel in zip(writes, targets, rels, strict=True):
                    with self._tree.parent(parts) as pfd:
                        _refuse_non_file(pfd, parts[-1], rel)
                        temp = _temp(pfd, parts[-1], w.content)
                    staged.append(Staged(path=rel, temp=temp, new_hash=sha256_hex(w.content)))
                mismatched = {
                    rel: now
                    for w, parts, rel in zip(writes, targets, rels, strict=True)
                    if w.expected_hash is not None and (now := self._hash(parts) or ABSENT) != w.expected_hash
                }
                if mismatched:
                    first = next(iter(mismatched))
                    raise stale(
                        f"file:{first}",
                        f"{len(mismatched)} file(s) changed since they were read: {sorted(mismatched)}; "
                        "nothing was switched",
                        mismatched[first],
                        mismatched=mismatched,
                    )
                switching = True
                self._journal.switch(staged, key, self.between_renames)
            except BaseException as exc:
                if not switching:  # nothing was switched: drop the temporaries (else: the journal's)
                    for s in staged:
                        self._drop(s)
                    raise
                if not isinstance(exc, OSError) or not self._repaired(staged):
                    raise
            return tuple(self._read_unlocked(rel, LATEST) for rel in rels)

    def _drop(self, s: Staged) -> None:
        parts = s.path.split("/")
        with contextlib.suppress(OSError), self._tree.parent(parts) as pfd:
            os.unlink(s.temp, dir_fd=pfd)

    def _repaired(self, staged: Sequence[Staged]) -> bool:
        """After a switch of ``staged`` failed: finish it now when its journal was written, or undo
        what it began, so no reader sees it half done and nothing stays behind; True when every
        file holds its new content. A repair failing too is left to the next write or open."""
        try:
            self.recovered.extend(self._journal.recover())
            return all(self._hash(s.path.split("/")) == s.new_hash for s in staged)
        except (OSError, ToolError):
            return False

    def check(self, expected: Mapping[str, str]) -> dict[str, str]:
        """Path → current hash (or ABSENT) of every path whose hash is not the expected one."""
        out = {}
        for path, want in expected.items():
            parts = self._parts(path)
            with os_errors("/".join(parts)):
                now = self._hash(parts) or ABSENT
            if now != want:
                out[path] = now
        return out

    def recover(self) -> list[Recovered]:
        """Finish, undo or quarantine every switch a crash interrupted (run on open; safe to call
        again)."""
        with self._locked(exclusive=True):
            return self._journal.recover()

    def committed(self, key: str) -> bool | None:
        """Whether the switch recorded with ``key`` took effect (after recovering interrupted ones);
        None when its journal was quarantined, so what it did cannot be told."""
        self.recover()
        return self._journal.committed(key)

    # ------------------------------------------------------------------ helpers
    def _parts(self, path: str) -> tuple[str, ...]:
        """The components of ``path`` below the root; reserved names are ``invalid_arguments``."""
        parts = components(path, *self._spellings)
        if len(os.fsencode(self.root / "/".join(parts))) >= _PATH_MAX:
            raise ToolError("invalid_arguments", f"path {path[:64]!r}... is longer than a path may be")
        if parts[0] == STATE_DIR or parts[-1].endswith(TEMP_SUFFIX):
            raise ToolError("invalid_arguments", f"path {path!r} is reserved")
        return parts

    def _hash(self, parts: Sequence[str]) -> str | None:
        """sha256 hex of the file ``parts`` names; None when it (or its directory) does not exist."""
        try:
            with self._tree.parent(parts) as pfd:
                return hash_at(pfd, parts[-1], "/".join(parts))
        except FileNotFoundError:
            return None

    def _check(self, pfd: int, name: str, rel: str, mode: Conditional) -> None:
        if not _matches(pfd, name, rel, mode):
            raise stale(
                f"file:{rel}",
                f"{rel} changed since it was read",
                hash_at(pfd, name, rel),
                expected=mode.content_hash or mode.version,
            )

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """The write lock, with any switch a crash interrupted finished (or undone) first: a write
        checked against a half-switched group, and then undone by its replay, would be lost."""
        with self._locked(exclusive=True):
            with os_errors(STATE_DIR):
                found = self._journal.recover() if self._journal.interrupted() else []
            self.recovered.extend(found)
            quarantined = [r.quarantine for r in found if r.quarantine is not None]
            if quarantined:
                raise conflict(
                    f"files:{self.root.name}",
                    f"an interrupted switch could not be judged and was moved aside to {quarantined}; "
                    "files it named may hold a group half switched. Nothing of this write was done: "
                    "re-read, then write again",
                    quarantined=quarantined,
                    written=False,
                )
            yield

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        with os_errors(f"{STATE_DIR}/lock"), self._journal.state() as sfd:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open("lock", flags, 0o644, dir_fd=sfd)
        try:
            flag = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
            deadline = time.monotonic() + self.lock_timeout_s
            while True:
                try:
                    fcntl.flock(fd, flag)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise conflict(
                            f"files:{self.root}",
                            f"another writer held {self.root} for {self.lock_timeout_s}s",
                        ) from None
                    time.sleep(0.002)  # waiting for another process's lock; bounded by the deadline
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


_PATH_MAX = 4096
"""Linux's PATH_MAX (bytes, the terminating NUL included): no longer path names a file."""


def _version(pfd: int, name: str, rel: str) -> FileVersion:
    content, st = read_at(pfd, name, rel)
    return FileVersion(path=rel, content=content, hash=sha256_hex(content), version=_token(st))


def _refuse_non_file(pfd: int, name: str, rel: str) -> None:
    """Refuse to write over a symlink (never followed), a directory or a special file."""
    st = lstat_at(pfd, name)
    if st is None or stat.S_ISREG(st.st_mode):
        return
    if stat.S_ISLNK(st.st_mode):
        raise escaped(rel, name)
    kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    raise ToolError("invalid_arguments", f"{rel} is {kind}, not a file", resource_ids=[f"file:{rel}"])


def _matches(pfd: int, name: str, rel: str, mode: Conditional) -> bool:
    try:
        data, st = read_at(pfd, name, rel)
    except FileNotFoundError:
        return version_matches(mode, None, None)
    if mode.content_hash is not None:
        return mode.content_hash == sha256_hex(data)
    return str(mode.version) in (_token(st), sha256_hex(data))


def _append(pfd: int, name: str, rel: str, data: bytes) -> FileVersion:
    """Every byte of ``data`` at the end, or (on any failure) the file as it was."""
    existed = lstat_at(pfd, name) is not None
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        fd = os.open(name, flags, 0o644, dir_fd=pfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(pfd, name, rel)
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError("invalid_arguments", f"{rel} is not a regular file", resource_ids=[f"file:{rel}"])
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                if existed:
                    os.ftruncate(fd, st.st_size)
                    os.fsync(fd)
                else:
                    os.unlink(name, dir_fd=pfd)
            raise
    finally:
        os.close(fd)
    return _version(pfd, name, rel)


def _temp(pfd: int, name: str, data: bytes) -> str:
    """The name of a new fsynced temporary holding ``data`` beside ``name``."""
    temp = f".{name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
    write_new(pfd, temp, data)
    return temp


def _token(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
