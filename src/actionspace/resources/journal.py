"""The switch journal: what keeps a group of file switches all-or-nothing across a crash.

What "atomic" means for a group of files:

* each file is switched by one ``os.replace`` of a fully written, fsynced temporary in the same
  directory, so a reader sees either the old or the new content of a file, never a mix;
* the group is all-or-nothing with respect to the checks: every expected hash is checked (under
  the store's write lock) before the first rename, and if any check fails nothing is switched;
* the renames themselves are several system calls, so a reader *can* observe the group half
  switched for the few microseconds they take (a :meth:`FileStore.snapshot` cannot: it holds the
  shared lock the switch excludes). A crash in the middle of the renames is repaired by the
  journal written (and fsynced) before the first rename: on the next open the switch is replayed
  when every new content is still available (a temporary or an already switched file), and rolled
  back from the backups otherwise. Writing the journal is the commit point.

Layout under ``<root>/.actionspace/``::

    journal/<id>.json        one per switch in progress (entries: path, temp, new hash, backup)
    journal/<id>/<n>.bak     hard links (or copies) of the files being replaced
    committed/<digest>       one empty file per committed switch key (``committed(key)``)
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from actionspace.resources.modes import sha256_hex

__all__ = ["TEMP_SUFFIX", "Journal", "Recovered", "RenameStep", "Staged", "file_hash", "fsync_dir"]

TEMP_SUFFIX = ".as-tmp"
"""Suffix of the temporaries a store writes next to their targets."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Staged:
    """One file of a switch: its target, the fsynced temporary holding the new content, its hash."""

    target: Path
    temp: Path
    new_hash: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameStep:
    """Input of the ``between_renames`` hook, called before every rename after the first."""

    index: int
    """Position (from 0) of the rename about to happen."""
    path: str
    """The target about to be switched, relative to the root."""
    total: int
    """How many renames the switch makes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovered:
    """What recovery did with one interrupted switch."""

    journal: str
    key: str | None
    action: Literal["replayed", "rolled_back"]
    paths: tuple[str, ...]


def file_hash(path: Path) -> str | None:
    """sha256 hex of a file's bytes; None when it does not exist."""
    try:
        return sha256_hex(path.read_bytes())
    except FileNotFoundError:
        return None


def fsync_dir(path: Path) -> None:
    """Make renames and creations inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + TEMP_SUFFIX)
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class Journal:
    """Journal of one store; every method must be called with the store's write lock held."""

    def __init__(self, root: Path, state: Path) -> None:
        self.root = root
        self.dir = state / "journal"
        self.committed_dir = state / "committed"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.committed_dir.mkdir(parents=True, exist_ok=True)

    def switch(
        self, staged: Sequence[Staged], key: str | None, between: Callable[[RenameStep], None] | None
    ) -> None:
        """Back up the targets, write the journal, rename every temporary over its target, finish.

        An exception from ``between`` (or from a rename) leaves the journal for :meth:`recover`.
        """
        jid = uuid.uuid4().hex
        backups = self.dir / jid
        backups.mkdir()
        entries = []
        for n, s in enumerate(staged):
            backup: Path | None = None
            if s.target.exists():
                backup = backups / f"{n}.bak"
                try:
                    os.link(s.target, backup)
                except OSError:  # another file system or no hard links: a copy does the same job
                    shutil.copy2(s.target, backup)
            entries.append(
                {
                    "path": self._rel(s.target),
                    "temp": self._rel(s.temp),
                    "new_hash": s.new_hash,
                    "backup": self._rel(backup) if backup is not None else None,
                }
            )
        fsync_dir(backups)
        journal = self.dir / f"{jid}.json"
        _write_durably(journal, json.dumps({"key": key, "entries": entries}))
        for n, s in enumerate(staged):
            if n and between is not None:
                between(RenameStep(index=n, path=self._rel(s.target), total=len(staged)))
            os.replace(s.temp, s.target)
        for parent in {s.target.parent for s in staged}:
            fsync_dir(parent)
        self._finish(journal, key)

    def interrupted(self) -> bool:
        """Whether a switch was left unfinished (its journal is still there)."""
        return any(self.dir.glob("*.json"))

    def recover(self) -> list[Recovered]:
        """Replay or roll back every switch a crash interrupted; sweep orphan temporaries."""
        done = []
        for journal in sorted(self.dir.glob("*.json")):
            data = json.loads(journal.read_text(encoding="utf-8"))
            entries = data["entries"]
            key = data.get("key")
            paths = tuple(str(e["path"]) for e in entries)
            if all(self._available(e) for e in entries):
                for e in entries:
                    temp = self.root / e["temp"]
                    if temp.exists():
                        os.replace(temp, self.root / e["path"])
                action: Literal["replayed", "rolled_back"] = "replayed"
            else:
                for e in entries:
                    self._undo(e)
                action, key = "rolled_back", None
            for parent in {(self.root / p).parent for p in paths}:
                fsync_dir(parent)
            self._finish(journal, key)
            done.append(Recovered(journal=journal.stem, key=data.get("key"), action=action, paths=paths))
        for backups in self.dir.iterdir():  # a crash before its journal was written: never switched
            if backups.is_dir():
                shutil.rmtree(backups, ignore_errors=True)
        for orphan in self.root.rglob(f"*{TEMP_SUFFIX}"):
            orphan.unlink(missing_ok=True)
        return done

    def committed(self, key: str) -> bool:
        """Whether a switch with ``key`` was committed (journal written and finished or replayed)."""
        return (self.committed_dir / _digest(key)).exists()

    def _available(self, entry: dict[str, str]) -> bool:
        target, temp = self.root / entry["path"], self.root / entry["temp"]
        if temp.exists():
            return file_hash(temp) == entry["new_hash"]
        return file_hash(target) == entry["new_hash"]

    def _undo(self, entry: dict[str, str]) -> None:
        target, temp = self.root / entry["path"], self.root / entry["temp"]
        temp.unlink(missing_ok=True)
        if file_hash(target) != entry["new_hash"]:
            return  # never switched (or changed since): leave it
        backup = entry.get("backup")
        if backup is not None:
            os.replace(self.root / backup, target)
        else:
            target.unlink()

    def _finish(self, journal: Path, key: str | None) -> None:
        if key is not None:
            _write_durably(self.committed_dir / _digest(key), "")
        with contextlib.suppress(FileNotFoundError):  # a failure keeps the journal: finished again later
            shutil.rmtree(self.dir / journal.stem)
        with contextlib.suppress(FileNotFoundError):
            journal.unlink()
        fsync_dir(self.dir)

    def _rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))


def _digest(key: str) -> str:
    return sha256_hex(key.encode("utf-8"))[:32]
