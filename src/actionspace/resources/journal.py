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
  back from the backups otherwise. Writing the whole journal, its last line included, is the
  commit point; the renames follow in the journal's order.

Layout under ``<root>/.actionspace/``::

    journal/<id>.json        one per switch in progress (lines: header, one per entry, check)
    journal/<id>/<n>.bak     hard links (or copies) of the files being replaced
    committed/<digest>       one empty file per committed switch key (``committed(key)``)
    quarantine/<stamp>-<id>/ a journal that could not be judged, its backups and new contents

A journal is lines of JSON: ``{"journal": 2, "key": …, "count": N}``, N entries (``path``, ``temp``,
``new_hash``, ``backup``), then ``{"end": <sha256 of every byte before it>}``. Recovery judges
what it reads (see :mod:`actionspace.resources._judge`): an intact journal is replayed or rolled
back as above; a journal torn short of its last line never reached the commit point and is rolled
back when that is provably complete; anything else is quarantined, never acted on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from actionspace.errors import ToolError
from actionspace.resources._beneath import Beneath, hash_at, lstat_at, read_at, write_new
from actionspace.resources._judge import (
    STATE_DIR,
    TEMP_SUFFIX,
    Entry,
    Manifest,
    Unjudgeable,
    manifest_text,
    parse,
)
from actionspace.resources.modes import sha256_hex

__all__ = ["STATE_DIR", "TEMP_SUFFIX", "Journal", "Recovered", "RenameStep", "Staged"]

_log = logging.getLogger("actionspace.resources")

_COPIES = (".json", ".copy")
"""The two copies of a journal, written in this order (both before the first rename)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Staged:
    """One file of a switch: its path (relative, normalized), the name of the fsynced temporary
    beside it holding the new content, and the new content's hash."""

    path: str
    temp: str
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
    action: Literal["replayed", "rolled_back", "quarantined"]
    """``quarantined``: the journal could not be judged safely; it was moved, with its backups and
    the new contents it names, to ``.actionspace/quarantine/`` (:attr:`quarantine`) untouched."""
    paths: tuple[str, ...]
    quarantine: str | None = None
    """Where a quarantined journal went, relative to the root; None otherwise."""


def _write_durably(at: tuple[int, str], text: str) -> None:
    """Write ``text`` to the file ``at`` (directory descriptor, name) through a fsynced temporary."""
    dir_fd, name = at
    tmp = name + TEMP_SUFFIX
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)
    write_new(dir_fd, tmp, text.encode("utf-8"))
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    os.fsync(dir_fd)


class Journal:
    """Journal of one store; every method but :meth:`committed` needs the store's write lock."""

    def __init__(self, tree: Beneath) -> None:
        self.tree = tree
        with self.tree.directory((), STATE_DIR) as rfd, contextlib.suppress(FileExistsError):
            os.mkdir(STATE_DIR, 0o755, dir_fd=rfd)
        with self.state() as fd:
            for name in ("journal", "committed"):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, dir_fd=fd)

    @contextmanager
    def state(self, *names: str) -> Iterator[int]:
        """A descriptor of ``.actionspace/<names>``; a symlink there is a ``permanent`` refusal."""
        try:
            with self.tree.directory((STATE_DIR, *names), STATE_DIR) as fd:
                yield fd
        except ToolError as exc:
            raise ToolError(
                "permanent", f"the store's state directory is unusable: {exc.error.message}"
            ) from None

    def switch(
        self, staged: Sequence[Staged], key: str | None, between: Callable[[RenameStep], None] | None
    ) -> None:
        """Back up the targets, write the journal, rename every temporary over its target, finish.

        An exception from ``between`` (or from a rename) leaves the journal for :meth:`recover`.
        """
        jid = uuid.uuid4().hex
        entries = []
        with self.state("journal") as jfd:
            os.mkdir(jid, 0o700, dir_fd=jfd)
            with self.state("journal", jid) as bfd:
                for n, s in enumerate(staged):
                    backup = self._back_up(s.path, bfd, f"{n}.bak")
                    folder = s.path.rpartition("/")[0]
                    entries.append(
                        Entry(
                            path=s.path,
                            temp=f"{folder}/{s.temp}" if folder else s.temp,
                            new_hash=s.new_hash,
                            backup=f"{STATE_DIR}/journal/{jid}/{n}.bak" if backup else None,
                        )
                    )
                os.fsync(bfd)
            text = manifest_text(key, entries)
            for copy in _COPIES:  # two copies: damage to one is survived whole
                _write_durably((jfd, f"{jid}{copy}"), text)
        for n, s in enumerate(staged):
            if n and between is not None:
                between(RenameStep(index=n, path=s.path, total=len(staged)))
            parts = s.path.split("/")
            with self.tree.parent(parts) as pfd:
                os.replace(s.temp, parts[-1], src_dir_fd=pfd, dst_dir_fd=pfd)
                os.fsync(pfd)
        self._finish(jid, key)

    def _back_up(self, path: str, bfd: int, name: str) -> bool:
        parts = path.split("/")
        with self.tree.parent(parts) as pfd:
            if lstat_at(pfd, parts[-1]) is None:
                return False
            try:
                os.link(parts[-1], name, src_dir_fd=pfd, dst_dir_fd=bfd, follow_symlinks=False)
            except OSError:  # another file system or no hard links: a fsynced copy does the same job
                write_new(bfd, name, read_at(pfd, parts[-1], path)[0])
        return True

    def interrupted(self) -> bool:
        """Whether a switch was left unfinished (a copy of its journal is still there)."""
        return bool(self._journals())

    def _journals(self) -> list[str]:
        with self.state("journal") as jfd:
            names = os.listdir(jfd)
        return sorted({n.rpartition(".")[0] for n in names if any(n.endswith(c) for c in _COPIES)})

    def recover(self) -> list[Recovered]:
        """Replay, roll back or quarantine every switch a crash interrupted; sweep orphans."""
        done = [self._recover_one(jid) for jid in self._journals()]
        self._sweep()
        return done

    def _recover_one(self, jid: str) -> Recovered:
        try:
            manifest = self._manifest(jid)
            action = self._judge(manifest)
        except Unjudgeable as why:
            return self._quarantine(jid, [], why.key, str(why))
        except ToolError as exc:  # a path it names now goes through a symlink, or is no file
            return self._quarantine(jid, manifest.entries, manifest.key, exc.error.message)
        if action is None:
            reason = "torn, and what it did cannot be told"
            return self._quarantine(jid, manifest.entries, manifest.key, reason)
        if action == "replayed":
            self._replay(manifest.entries)
        else:
            self._roll_back(manifest.entries)
        self._finish(jid, manifest.key if action == "replayed" else None)
        paths = tuple(e.path for e in manifest.entries)
        return Recovered(journal=jid, key=manifest.key, action=action, paths=paths)

    def _manifest(self, jid: str) -> Manifest:
        """The journal of ``jid`` from an intact copy, else from the longer torn one."""
        found: list[Manifest] = []
        why: list[str] = []
        keys: list[str | None] = []
        for copy in _COPIES:
            try:
                with self.state("journal") as jfd:
                    found.append(parse(read_at(jfd, f"{jid}{copy}", f"{jid}{copy}")[0], jid))
            except FileNotFoundError:
                continue
            except (Unjudgeable, IsADirectoryError, ToolError) as exc:
                keys.append(exc.key if isinstance(exc, Unjudgeable) else None)
                why.append(f"{copy}: {exc.error.message if isinstance(exc, ToolError) else exc}")
        intact = [m for m in found if m.intact]
        if intact or found:
            return (intact or sorted(found, key=lambda m: -len(m.entries)))[0]
        key = next((k for k in keys if k is not None), None)
        raise Unjudgeable("; ".join(why) or "no copy of it can be read", key=key)

    def _judge(self, manifest: Manifest) -> Literal["replayed", "rolled_back"] | None:
        """What to do with a switch; None: it cannot be judged safely (quarantine it)."""
        entries = manifest.entries
        if manifest.intact and all(self._available(e) for e in entries):
            return "replayed"
        complete = manifest.intact or len(entries) == manifest.count
        # renames follow the journal's order: an entry whose temporary is still there was not
        # switched, nor was any after it, so every switched entry is one of those read
        bounded = any(self._exists(e.temp) for e in entries)
        if (complete or bounded) and all(self._reversible(e) for e in entries):
            return "rolled_back"
        return None

    def _hash(self, path: str) -> str | None:
        parts = path.split("/")
        try:
            with self.tree.parent(parts) as pfd:
                return hash_at(pfd, parts[-1], path)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _exists(self, path: str) -> bool:
        parts = path.split("/")
        try:
            with self.tree.parent(parts) as pfd:
                return lstat_at(pfd, parts[-1]) is not None
        except (FileNotFoundError, NotADirectoryError):
            return False

    def _available(self, e: Entry) -> bool:
        if self._exists(e.temp):
            return self._hash(e.temp) == e.new_hash
        return self._hash(e.path) == e.new_hash

    def _reversible(self, e: Entry) -> bool:
        if self._exists(e.temp) or self._hash(e.path) != e.new_hash or e.backup is None:
            return True
        return self._exists(e.backup)

    def _replay(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            parts = e.path.split("/")
            with self.tree.parent(parts) as pfd:
                temp = e.temp.rpartition("/")[2]
                if lstat_at(pfd, temp) is not None:
                    os.replace(temp, parts[-1], src_dir_fd=pfd, dst_dir_fd=pfd)
                os.fsync(pfd)

    def _roll_back(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            parts = e.path.split("/")
            try:
                with self.tree.parent(parts) as pfd:
                    self._undo(e, pfd, parts[-1])
            except (FileNotFoundError, NotADirectoryError):
                continue  # its directory is gone: nothing of it to take back

    def _undo(self, e: Entry, pfd: int, name: str) -> None:
        temp = e.temp.rpartition("/")[2]
        if lstat_at(pfd, temp) is not None:  # never renamed (a rename consumes the temporary)
            os.unlink(temp, dir_fd=pfd)
        elif hash_at(pfd, name, e.path) == e.new_hash:  # switched: take it back
            if e.backup is None:
                os.unlink(name, dir_fd=pfd)
            else:
                bak = e.backup.split("/")
                with self.tree.parent(bak) as bfd:
                    os.replace(bak[-1], name, src_dir_fd=bfd, dst_dir_fd=pfd)
        os.fsync(pfd)

    def _finish(self, jid: str, key: str | None) -> None:
        if key is not None:
            with self.state("committed") as cfd:
                _write_durably((cfd, _digest(key)), "")
        with self.state("journal") as jfd:
            with contextlib.suppress(FileNotFoundError):  # a failure keeps the journal: finished again later
                shutil.rmtree(jid, dir_fd=jfd)
            for copy in reversed(_COPIES):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{jid}{copy}", dir_fd=jfd)
            os.fsync(jfd)

    def _quarantine(self, jid: str, entries: Sequence[Entry], key: str | None, reason: str) -> Recovered:
        """Move the journal, its backups and the new contents it names aside, untouched."""
        dest = f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%S.%fZ')}-{jid}"
        with self.state() as sfd, contextlib.suppress(FileExistsError):
            os.mkdir("quarantine", 0o700, dir_fd=sfd)
        with self.state("quarantine") as qfd:
            os.mkdir(dest, 0o700, dir_fd=qfd)
            with self.state("journal") as jfd:
                for name, kept in ((f"{jid}{c}", f"journal{c}") for c in _COPIES):
                    if lstat_at(jfd, name) is not None:
                        os.rename(name, f"{dest}/{kept}", src_dir_fd=jfd, dst_dir_fd=qfd)
                if lstat_at(jfd, jid) is not None:
                    os.rename(jid, f"{dest}/backups", src_dir_fd=jfd, dst_dir_fd=qfd)
                os.fsync(jfd)
            for n, e in enumerate(entries):
                self._keep_new_content(e, qfd, f"{dest}/{n}.new")
            write_new(qfd, f"{dest}/reason", f"{reason}\nkey: {key!r}\n".encode())
            if key is not None:
                _write_durably((qfd, f"{_digest(key)}.key"), dest)
            os.fsync(qfd)
        where = f"{STATE_DIR}/quarantine/{dest}"
        _log.warning("switch journal %s could not be judged (%s); moved aside to %s", jid, reason, where)
        paths = tuple(e.path for e in entries)
        return Recovered(journal=jid, key=key, action="quarantined", paths=paths, quarantine=where)

    def _keep_new_content(self, e: Entry, qfd: int, name: str) -> None:
        parts = e.temp.split("/")
        with contextlib.suppress(OSError, ToolError), self.tree.parent(parts) as pfd:
            if lstat_at(pfd, parts[-1]) is not None:
                os.rename(parts[-1], name, src_dir_fd=pfd, dst_dir_fd=qfd)

    def _sweep(self) -> None:
        """Drop backups of switches whose journal was never written, and every orphan temporary
        (temporaries only exist under the write lock, which the caller holds)."""
        with self.state("journal") as jfd:
            names = set(os.listdir(jfd))
            for name in names:
                st = lstat_at(jfd, name)
                unwritten = not any(f"{name}{copy}" in names for copy in _COPIES)
                if st is not None and stat.S_ISDIR(st.st_mode) and unwritten:
                    shutil.rmtree(name, dir_fd=jfd, ignore_errors=True)
        for _, _, files, dir_fd in os.fwalk(self.tree.root):
            for name in files:
                if name.endswith(TEMP_SUFFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=dir_fd)

    def committed(self, key: str) -> bool | None:
        """Whether a switch with ``key`` was committed (journal written and finished or replayed);
        None when its journal was quarantined (what it did cannot be told)."""
        with self.state("committed") as cfd:
            if lstat_at(cfd, _digest(key)) is not None:
                return True
        try:
            with self.state("quarantine") as qfd:
                return None if lstat_at(qfd, f"{_digest(key)}.key") is not None else False
        except FileNotFoundError:
            return False


def _digest(key: str) -> str:
    return sha256_hex(key.encode("utf-8"))[:32]
