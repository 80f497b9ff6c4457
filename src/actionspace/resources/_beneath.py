"""Paths beneath a root, opened one component at a time relative to directory descriptors.

A resource path is split into components lexically (``.`` dropped, ``..`` taken back, never above
the root); the root is then opened and every directory of the path is opened relative to the one
before it with ``O_NOFOLLOW | O_DIRECTORY``, and the file itself is opened, renamed or unlinked
relative to the descriptor of its directory. There is no moment between a check and a use: the
open is the check, so a directory swapped for a symlink while a store works is refused (or, when it
was swapped after being opened, the store keeps working in the directory it opened). A symlink
anywhere in a path is ``invalid_arguments`` ("escapes the root"), never followed, whether it
points out of the root or not.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from actionspace.errors import ToolError
from actionspace.resources.modes import sha256_hex

__all__ = [
    "Beneath",
    "components",
    "escaped",
    "hash_at",
    "lstat_at",
    "read_at",
    "refuse_link",
    "write_all",
    "write_new",
]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
"""``O_NONBLOCK``: opening a FIFO must not wait for a writer (it is refused as not a file)."""


def components(path: object, *roots: Path) -> tuple[str, ...]:
    """The components of ``path`` below the root, or ``invalid_arguments`` when it names no file
    there (not text, NUL, lone surrogate, the root itself, above it, absolute elsewhere)."""
    if not isinstance(path, str):
        raise ToolError("invalid_arguments", f"a path is text, not {type(path).__name__}")
    if "\x00" in path:
        raise ToolError("invalid_arguments", "path contains a NUL byte")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolError("invalid_arguments", "path is not valid UTF-8 text (a lone surrogate)") from None
    parts = _lexical(path)
    if path.startswith("/"):
        for root in roots:
            below = root.parts[1:]
            if parts[: len(below)] == below:
                parts = parts[len(below) :]
                break
        else:
            raise ToolError("invalid_arguments", f"path {path!r} escapes the root")
    if not parts or parts[0] == "..":
        raise ToolError("invalid_arguments", f"path {path!r} escapes the root")
    return parts


def _lexical(path: str) -> tuple[str, ...]:
    out: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                return ("..",)
            out.pop()
        else:
            out.append(part)
    return tuple(out)


def escaped(rel: str, name: str) -> ToolError:
    """The refusal of a path that goes through the symlink ``name``."""
    return ToolError(
        "invalid_arguments",
        f"path {rel!r} escapes the root: {name!r} is a symbolic link, which the store never follows",
        resource_ids=[f"file:{rel}"],
    )


def refuse_link(dir_fd: int, name: str, rel: str) -> None:
    """Raise :func:`escaped` when ``name`` in ``dir_fd`` is a symlink (after an open refused it)."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            raise escaped(rel, name)


class Beneath:
    """Opens directories beneath ``root`` (an absolute, resolved path) without following links."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @contextmanager
    def directory(self, dirs: Sequence[str], rel: str) -> Iterator[int]:
        """A descriptor of ``root/dirs...`` (closed on exit); raises the ``OSError`` of a missing
        or non-directory component, :func:`escaped` for a symlink."""
        fd = os.open(self.root, DIR_FLAGS)
        try:
            for name in dirs:
                try:
                    nxt = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                        refuse_link(fd, name, rel)
                    raise
                os.close(fd)
                fd = nxt
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def parent(self, parts: Sequence[str]) -> Iterator[int]:
        """A descriptor of the directory holding the file ``parts`` names."""
        with self.directory(parts[:-1], "/".join(parts)) as fd:
            yield fd


def read_at(dir_fd: int, name: str, rel: str) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of the regular file ``name``; ``FileNotFoundError`` when absent,
    ``IsADirectoryError`` for a directory, ``invalid_arguments`` for a symlink or a special file."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):
            refuse_link(dir_fd, name, rel)
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), rel)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError("invalid_arguments", f"{rel} is not a regular file", resource_ids=[f"file:{rel}"])
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def hash_at(dir_fd: int, name: str, rel: str) -> str | None:
    """sha256 hex of the file ``name``; None when it does not exist."""
    try:
        return sha256_hex(read_at(dir_fd, name, rel)[0])
    except FileNotFoundError:
        return None


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """The stat of ``name`` itself (a link is not followed); None when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def write_new(dir_fd: int, name: str, data: bytes) -> None:
    """Create ``name`` (it must not exist), write all of ``data`` and fsync it; on any failure
    nothing stays behind."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    try:
        write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte (a write may take fewer than given: a signal, a nearly full disk)."""
    rest = memoryview(data)
    while rest:
        rest = rest[os.write(fd, rest) :]
