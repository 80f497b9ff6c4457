"""Hash-checked file operations confined to a root directory.

``FileStore(root)`` reads a file as a :class:`FileVersion` (content, sha256 hash, version token)
and writes it in one of the write modes of :mod:`actionspace.resources.modes`. Every write goes to
a temporary in the same directory, is fsynced and switched in with ``os.replace``, so readers
never see a partly written file. :meth:`FileStore.apply_group` switches several files
all-or-nothing (see :mod:`actionspace.resources.journal` for what "atomic" means there).

Writers of this store (in this or any other process) serialize on an advisory lock file
(``<root>/.actionspace/lock``); a snapshot takes it shared. Editors that do not use the store are
not excluded, which is exactly what the hash checks are for.

Paths are relative to the root and confined to it after normalization and symlinks, like
``actionspace.validation.semantic.PathWithin`` (annotate tool arguments with it so escapes are
rejected at validation already); an escaping path here is ``invalid_arguments``.

A refusal of the file system is a :class:`~actionspace.errors.ToolError` too (see
:mod:`actionspace.resources._os_errors`), and a failed write leaves the file as it was: no
temporary behind, an append cut short taken back.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from actionspace.errors import ToolError
from actionspace.resources._os_errors import os_errors
from actionspace.resources.journal import (
    TEMP_SUFFIX,
    Journal,
    Recovered,
    RenameStep,
    Staged,
    file_hash,
    fsync_dir,
)
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

STATE_DIR = ".actionspace"
"""Directory under the root holding the lock file and the journal; never readable as a resource."""


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
    write that finds one (a crash of another process after this store was opened).
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
        self._state = self.root / STATE_DIR
        self._state.mkdir(exist_ok=True)
        self._lock_path = self._state / "lock"
        self._lock_path.touch(exist_ok=True)
        self._journal = Journal(self.root, self._state)
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
        target = self._resolve(path)
        try:
            with os_errors(self._rel(target)), open(target, "rb") as fh:
                content = fh.read()
                st = os.fstat(fh.fileno())
        except ToolError as exc:
            if not isinstance(exc.__cause__, (FileNotFoundError, IsADirectoryError)):
                raise
            raise ToolError("invalid_arguments", f"no file {path!r}", resource_ids=[f"file:{path}"]) from None
        found = FileVersion(
            path=self._rel(target), content=content, hash=sha256_hex(content), version=_token(st)
        )
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
        target = self._writable(self._resolve(path))
        rid = f"file:{self._rel(target)}"
        with self._writing(), os_errors(self._rel(target)):
            if isinstance(mode, Append):
                return self._append(target, data)
            if isinstance(mode, Conditional):
                self._check(target, mode, rid)
            temp = self._temp(target, data)
            try:
                if isinstance(mode, Conditional) and not self._matches(target, mode):
                    raise conflict(
                        rid, f"{path} changed while it was being written", current_hash=file_hash(target)
                    )
                os.replace(temp, target)
            finally:
                temp.unlink(missing_ok=True)
            fsync_dir(target.parent)
            return self._read_unlocked(self._rel(target), LATEST)

    def apply_group(self, writes: Sequence[GroupWrite], *, key: str | None = None) -> tuple[FileVersion, ...]:
        """Switch every file of ``writes`` or none (module docstring of ``journal``).

        Every temporary is written first, then every ``expected_hash`` is checked; one mismatch
        raises ``stale_reference`` (``details["mismatched"]``: path → current hash) and nothing is
        switched. ``key`` is recorded with the switch for :meth:`committed`.
        """
        targets = [self._writable(self._resolve(w.path)) for w in writes]
        if len(set(targets)) != len(targets):
            raise ToolError("invalid_arguments", "a switch group names the same file twice")
        with self._writing(), os_errors(", ".join(self._rel(t) for t in targets)):
            staged: list[Staged] = []
            switching = False
            try:
                for w, target in zip(writes, targets, strict=True):
                    staged.append(
                        Staged(
                            target=target, temp=self._temp(target, w.content), new_hash=sha256_hex(w.content)
                        )
                    )
                mismatched = {
                    self._rel(t): file_hash(t) or ABSENT
                    for w, t in zip(writes, targets, strict=True)
                    if w.expected_hash is not None and (file_hash(t) or ABSENT) != w.expected_hash
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
                        s.temp.unlink(missing_ok=True)
                    raise
                if not isinstance(exc, OSError) or not self._repaired(staged):
                    raise
            return tuple(self._read_unlocked(self._rel(t), LATEST) for t in targets)

    def _repaired(self, staged: Sequence[Staged]) -> bool:
        """After a switch of ``staged`` failed: finish it now when its journal was written, or undo
        what it began, so no reader sees it half done and nothing stays behind; True when every
        file holds its new content. A repair failing too is left to the next write or open."""
        try:
            self.recovered.extend(self._journal.recover())
        except OSError:
            return False
        return all(file_hash(s.target) == s.new_hash for s in staged)

    def check(self, expected: Mapping[str, str]) -> dict[str, str]:
        """Path → current hash (or ABSENT) of every path whose hash is not the expected one."""
        out = {}
        for path, want in expected.items():
            target = self._resolve(path)
            with os_errors(self._rel(target)):
                now = file_hash(target) or ABSENT
            if now != want:
                out[path] = now
        return out

    def recover(self) -> list[Recovered]:
        """Finish or undo every switch a crash interrupted (run on open; safe to call again)."""
        with self._locked(exclusive=True):
            return self._journal.recover()

    def committed(self, key: str) -> bool:
        """Whether the switch recorded with ``key`` took effect (after recovering interrupted ones)."""
        self.recover()
        return self._journal.committed(key)

    # ------------------------------------------------------------------ helpers
    def _check(self, target: Path, mode: Conditional, rid: str) -> None:
        if not self._matches(target, mode):
            current = file_hash(target)
            raise stale(
                rid,
                f"{self._rel(target)} changed since it was read",
                current,
                expected=mode.content_hash or mode.version,
            )

    def _matches(self, target: Path, mode: Conditional) -> bool:
        try:
            with open(target, "rb") as fh:
                data, token = fh.read(), _token(os.fstat(fh.fileno()))
        except FileNotFoundError:
            return version_matches(mode, None, None)
        if mode.content_hash is not None:
            return mode.content_hash == sha256_hex(data)
        return str(mode.version) in (token, sha256_hex(data))

    def _append(self, target: Path, data: bytes) -> FileVersion:
        """Every byte of ``data`` at the end, or (on any failure) the file as it was."""
        existed = target.exists()
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                rest = memoryview(data)
                while rest:  # a write may take fewer bytes than given (a signal, a nearly full disk)
                    rest = rest[os.write(fd, rest) :]
                os.fsync(fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    if existed:
                        os.ftruncate(fd, size)
                        os.fsync(fd)
                    else:
                        target.unlink()
                raise
        finally:
            os.close(fd)
        return self._read_unlocked(self._rel(target), LATEST)

    def _temp(self, target: Path, data: bytes) -> Path:
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")
        try:
            with open(temp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink(missing_ok=True)
            raise
        return temp

    def _writable(self, target: Path) -> Path:
        """``target``, refused when it is a directory (a switch could not replace it)."""
        with os_errors(self._rel(target)):
            is_dir = target.is_dir()
        if is_dir:
            raise ToolError("invalid_arguments", f"{self._rel(target)} is a directory, not a file")
        return target

    def _resolve(self, path: str) -> Path:
        if not isinstance(path, str):
            raise ToolError("invalid_arguments", f"a path is text, not {type(path).__name__}")
        if "\x00" in path:
            raise ToolError("invalid_arguments", "path contains a NUL byte")
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError("invalid_arguments", "path is not valid UTF-8 text (a lone surrogate)") from None
        target = Path(os.path.realpath(self.root / path))
        if target == self.root or not target.is_relative_to(self.root):
            raise ToolError("invalid_arguments", f"path {path!r} escapes the root")
        if target.is_relative_to(self._state) or target.name.endswith(TEMP_SUFFIX):
            raise ToolError("invalid_arguments", f"path {path!r} is reserved")
        return target

    def _rel(self, target: Path) -> str:
        return target.relative_to(self.root).as_posix()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """The write lock, with any switch a crash interrupted finished (or undone) first: a write
        checked against a half-switched group, and then undone by its replay, would be lost."""
        with self._locked(exclusive=True):
            if self._journal.interrupted():
                self.recovered.extend(self._journal.recover())
            yield

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        fd = os.open(self._lock_path, os.O_RDWR)
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


def _token(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"
