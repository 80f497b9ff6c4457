"""The ``switch`` environment: files staged by several tools, switched in together at commit.

Register it with ``rt.environment("files", FileSwitchEnvironment(store))``; a tool declaring
``transaction="files"`` receives the open :class:`FileSwitch` as its ``transaction`` argument
inside a plan group of mode ``"switch"`` (and None outside one), and calls :meth:`FileSwitch.stage`
instead of writing. ``stage`` checks the expected hash at once, so an outdated base fails that
member with ``stale_reference`` and the group is rolled back before anything is switched.
``commit`` then runs :meth:`FileStore.apply_group`, which checks every hash again under the write
lock and switches all files or none. A check failing only at commit (an editor outside the store
changed a file between stage and commit) raises from ``commit``; the runtime then asks
:meth:`FileSwitchEnvironment.committed`, which says no, so nothing is claimed.
"""

from __future__ import annotations

from actionspace.errors import ToolError
from actionspace.resources._os_errors import os_errors
from actionspace.resources.files import FileStore, GroupWrite
from actionspace.resources.modes import ABSENT, EnvironmentMode, sha256_hex, stale

__all__ = ["FileSwitch", "FileSwitchEnvironment"]


class FileSwitch:
    """One open switch: the staged writes of a group (a :class:`~actionspace.resources.Transaction`)."""

    def __init__(self, store: FileStore, key: str) -> None:
        self.store = store
        self.key = key
        self.staged: list[GroupWrite] = []

    def stage(self, path: str, content: bytes | str, *, expected_hash: str | None) -> str:
        """Stage ``content`` for ``path``; returns its hash. Raises ``stale_reference`` when the file's
        hash is no longer ``expected_hash`` (None: overwrite, :data:`ABSENT`: must not exist)."""
        data = content.encode("utf-8") if isinstance(content, str) else content
        parts = self.store._parts(path)
        rel = "/".join(parts)
        if expected_hash is not None:
            with os_errors(rel):
                current = self.store._hash(parts) or ABSENT
            if current != expected_hash:
                raise stale(
                    f"file:{rel}", f"{rel} changed since it was read", current, expected=expected_hash
                )
        self.staged = [w for w in self.staged if w.path != rel]  # one file however it is spelled
        self.staged.append(GroupWrite(path=rel, content=data, expected_hash=expected_hash))
        return sha256_hex(data)

    def commit(self) -> None:
        """Switch every staged file or none (raises when a check fails; see the module docstring)."""
        if self.staged:
            self.store.apply_group(self.staged, key=self.key)
        self.staged = []

    def rollback(self) -> None:
        """Forget the staged writes; nothing was switched."""
        self.staged = []


class FileSwitchEnvironment:
    """A :class:`~actionspace.resources.Transactional` of mode ``"switch"`` over one :class:`FileStore`."""

    mode: EnvironmentMode = "switch"
    """Always ``"switch"``."""

    def __init__(self, store: FileStore) -> None:
        self.store = store

    def begin(self, key: str) -> FileSwitch:
        return FileSwitch(self.store, key)

    def committed(self, key: str) -> bool | None:
        """Whether the switch of ``key`` took effect; None when that cannot be told (the store
        cannot be read, or the switch's journal was quarantined)."""
        try:
            return self.store.committed(key)
        except (OSError, ToolError):
            return None
