"""What a file system refusal means to whoever asked: one mapping of ``OSError`` to a category.

* the path names nothing a file can be (missing directory, a file used as a directory, a
  directory used as a file, a name too long, a symlink, a FIFO or socket with nobody at the
  other end) → ``invalid_arguments``;
* the process may not read or write it (permissions, a read-only file system) → ``permanent``;
* the disk is full or the quota spent → ``transient``: nothing was written (the stores take their
  partial writes back), so the same write may be asked again once there is room;
* anything else → ``unclassified``, with the errno name kept for diagnosis.

Messages name the path relative to the store's root, never the root itself.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

from actionspace.errors import Category, ToolError

__all__ = ["os_errors", "typed"]

_INVALID = frozenset(
    {errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL, errno.ENXIO}
)
_DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})
_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def typed(exc: OSError, path: str) -> ToolError:
    """The :class:`ToolError` of ``exc`` met while reading or writing ``path`` (relative)."""
    code = exc.errno
    category: Category = (
        "invalid_arguments"
        if code in _INVALID
        else "permanent"
        if code in _DENIED
        else "transient"
        if code in _FULL
        else "unclassified"
    )
    name = errno.errorcode.get(code, type(exc).__name__) if code is not None else type(exc).__name__
    details = {"written": False} if category == "transient" else {}
    return ToolError(
        category,
        f"{path}: {exc.strerror or name}",
        vendor_code=name,
        resource_ids=[f"file:{path}"],
        details=details,
    )


@contextmanager
def os_errors(path: str) -> Iterator[None]:
    """Raise every ``OSError`` of the block as :func:`typed` (a :class:`ToolError` passes through)."""
    try:
        yield
    except OSError as exc:
        raise typed(exc, path) from exc
