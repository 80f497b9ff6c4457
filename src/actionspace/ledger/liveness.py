"""Process marks: whether any other process of a store may still be alive to hold a send.

A proposal that finds its action's entry ``dispatched`` or ``unknown`` under another caller cannot
tell a dead holder from a slow one by the entry: it waits (``MAX_WAIT_S``) and settles it only past
the tool's ``holder_window``. Each process that opens a shared store holds, for as long as the
store is open, a mark the operating system or the database drops when the process dies:

* SQLite: an exclusive ``flock`` on a file of its own in ``<db>-live/`` beside the database (WAL
  keeps every process of a SQLite file on one host, where such locks hold). A file whose lock can
  be taken is a dead process's: whoever finds it removes it.
* PostgreSQL: a session advisory lock (two-key form: the ledger table's oid, a number of its own)
  on a dedicated connection with TCP keepalives; a thread takes it again at once when that session
  ends under a live process (a server restart, a failover), and a look trusts "none" only from a
  session of its own at least :data:`PG_SETTLED_S` old, so every live process had that long to
  take its mark again after such an event.
* memory: nothing (one process).

:func:`others_alive` answers True whenever it cannot tell (locks that do not work, an error, a
process forked from the mark's owner, a store without marks): a false "alive" only keeps today's
waits; a false "dead" could send a write twice, so it is never concluded from doubt.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import select
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Protocol

from actionspace.errors import ConfigurationError
from actionspace.ledger.late import still_running

__all__ = ["LOOK_EVERY_S", "PG_SETTLED_S", "alone", "hold", "others_alive"]

LOOK_EVERY_S: Final = 0.25
"""A mark's answer "some other process lives" is reused this long before it looks again."""
PG_SETTLED_S: Final = 5.0
"""How long a PostgreSQL mark session must have lasted before its look may answer "none alive"."""
_STALE_TMP_S: Final = 60.0
"""A half-made mark file (its process died while taking it) older than this is removed."""
_BUSY: Final = frozenset({errno.EWOULDBLOCK, errno.EAGAIN})


class _Mark(Protocol):
    def others_alive(self) -> bool: ...
    def release(self) -> None: ...


_MARKS: dict[int, _Mark] = {}
"""id(ledger store) → this process's mark on it, while the store is open."""
_MARKS_LOCK = threading.Lock()


def hold(store: Any, url: str, kind: str, *, busy: Callable[[], bool] = lambda: False) -> Callable[[], None]:
    """Take this process's mark on the ``kind`` (``memory``, ``sqlite``, ``postgresql``) store ``url``
    opened as ``store`` (a SQLite store's ``path`` is read); the function that drops it. While
    ``busy()`` is True (a send may still run on a thread here) the drop waits for it.
    Raises ConfigurationError when a PostgreSQL mark cannot be taken (the process would be unseen)."""
    mark: _Mark
    if kind == "sqlite":
        mark = _FileMark(Path(str(store.path)))
    elif kind == "postgresql":
        mark = _SessionMark(url)
    else:
        return lambda: None
    with _MARKS_LOCK:
        _MARKS[id(store)] = mark

    def release() -> None:
        with _MARKS_LOCK:
            if _MARKS.get(id(store)) is not mark:
                return
            del _MARKS[id(store)]
        _release_when_idle(mark, busy)

    return release


def _release_when_idle(mark: _Mark, busy: Callable[[], bool]) -> None:
    """Drop ``mark`` now, or once ``busy()`` is False (looked at every second)."""
    if not busy():
        mark.release()
        return
    later = threading.Timer(1.0, _release_when_idle, (mark, busy))
    later.daemon = True
    later.start()


def others_alive(store: object) -> bool:
    """Whether a process other than this one may hold sends of ``store``: False only when none can."""
    with _MARKS_LOCK:
        mark = _MARKS.get(id(store))
    if mark is None:
        return True
    try:
        return mark.others_alive()
    except Exception:  # a look that failed tells nothing
        return True


def alone(store: object, key: str) -> bool:
    """No other process of ``store`` lives and no attempt of ``key`` still runs in this one: a
    holder of ``key``'s entry is dead, or a caller of this process, which recovery here leaves be."""
    return not still_running(key) and not others_alive(store)


class _FileMark:
    """An exclusive ``flock`` held on ``<db>-live/<pid>-<random>.lock`` (see the module docstring)."""

    def __init__(self, db: Path) -> None:
        self.dir = Path(f"{db}-live")
        self.pid = os.getpid()
        self.name = f"{self.pid}-{secrets.token_hex(6)}"
        self.fd: int | None = None
        try:
            self.file = self._take()
        except OSError as exc:  # unmarked, this process could be taken for a dead one: not opened
            raise ConfigurationError(f"cannot hold this process's mark in {self.dir}: {exc}") from exc
        self.alive_until = 0.0

    def _take(self) -> Path:
        """Lock a fresh file first, then give it its ``.lock`` name: a look never finds it unlocked."""
        for _ in range(8):  # a look of another process may remove the empty directory meanwhile
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = self.dir / f"{self.name}.tmp"
            try:
                fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except FileNotFoundError:
                continue
            if not _locks_work(fd, tmp):
                os.close(fd)
                os.replace(tmp, self.dir / f"{self.name}.nolock")  # every look answers "alive" then
                return self.dir / f"{self.name}.nolock"
            self.fd = fd
            os.replace(tmp, self.dir / f"{self.name}.lock")
            return self.dir / f"{self.name}.lock"
        raise ConfigurationError(f"cannot create a process mark in {self.dir}")

    def others_alive(self) -> bool:
        if self.fd is None or self.pid != os.getpid():  # no working lock, or a forked child
            return True
        if time.monotonic() < self.alive_until:
            return True
        alive = False
        for name in os.listdir(self.dir):
            if name == self.file.name:
                continue
            path = self.dir / name
            if name.endswith(".tmp"):  # not yet a mark: its process has written nothing through it
                _remove_if_stale(path)
            elif not name.endswith(".lock") or _probe(path) != "dead":
                alive = True  # a live process, a file system that cannot tell, or a file not ours
        if alive:
            self.alive_until = time.monotonic() + LOOK_EVERY_S
        return alive

    def release(self) -> None:
        if self.pid != os.getpid():  # a forked child: the mark is its parent's
            return
        self.file.unlink(missing_ok=True)  # unlinked while locked: no look takes it for a dead one's
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        with contextlib.suppress(OSError):  # other processes' marks are there
            self.dir.rmdir()


def _locks_work(fd: int, path: Path) -> bool:
    """Lock ``fd`` (exclusive) and check that a second open of ``path`` is refused the lock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        other = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in _BUSY
    finally:
        os.close(other)
    return False  # taken twice: this file system's locks do not exclude


def _probe(path: Path) -> str:
    """``alive`` (locked by its process), ``dead`` (its lock taken here: the file removed), or
    ``unknown``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return "dead"  # removed meanwhile: its process released it or another look cleaned it
    except OSError:
        return "unknown"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        return "alive" if exc.errno in _BUSY else "unknown"
    else:
        path.unlink(missing_ok=True)  # still locked by this look: its process cannot be using it
        return "dead"
    finally:
        os.close(fd)


def _remove_if_stale(path: Path) -> None:
    """Remove the half-made mark ``path`` if it is old and unlocked (its process died taking it)."""
    try:
        old = time.time() - path.stat().st_mtime > _STALE_TMP_S
    except OSError:
        return
    if old:
        _probe(path)


class _SessionMark:
    """A session advisory lock on a connection of its own (see the module docstring)."""

    def __init__(self, url: str) -> None:
        import psycopg  # the postgres extra is installed: the store at ``url`` opened

        self.url, self.psycopg = url, psycopg
        self.conn: Any = None
        self.table = 0
        self.pid = os.getpid()
        self.number = secrets.randbelow(2**31)
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.alive_until = 0.0
        try:
            self.conn, self.since = self._connect(), time.monotonic()
        except (psycopg.Error, OSError) as exc:
            raise ConfigurationError(f"cannot hold this process's mark on the store: {exc}") from exc
        threading.Thread(target=self._watch, name="actionspace-mark", daemon=True).start()

    def _connect(self) -> Any:
        """A new session holding this process's mark (keepalives: a server gone silent is noticed)."""
        conn: Any = self.psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=5,
            keepalives=1,
            keepalives_idle=1,
            keepalives_interval=1,
            keepalives_count=2,
        )
        try:
            row = conn.execute("SELECT 'ledger_entries'::regclass::oid::bigint").fetchone()
            self.table = int(row[0])
            while True:
                took = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (_int4(self.table), self.number))
                if took.fetchone()[0]:
                    return conn
                self.number = secrets.randbelow(2**31)  # another process drew the same number
        except BaseException:
            conn.close()
            raise

    def others_alive(self) -> bool:
        if self.pid != os.getpid() or self.stopped.is_set():
            return True
        now = time.monotonic()
        if now < self.alive_until:
            return True
        with self.lock:
            if now - self.since < PG_SETTLED_S:  # a restart may have dropped marks not yet retaken
                return True
            row = self.conn.execute(_OTHERS, {"table": self.table}).fetchone()
        alive = bool(row[0])
        if alive:
            self.alive_until = time.monotonic() + LOOK_EVERY_S
        return alive

    def _watch(self) -> None:
        """Take the mark again as soon as its session ends while this process lives."""
        while not self.stopped.is_set():
            try:
                readable = select.select([self.conn.fileno()], [], [], 1.0)[0]
            except Exception:  # closed under it: look below
                readable = [True]
            if not readable or self.stopped.is_set():
                continue
            with self.lock:
                try:
                    self.conn.execute("SELECT 1")
                    continue  # a look's answer woke it, or a notice
                except Exception:
                    self.since = float("inf")  # no look trusts "none alive" until it is retaken
            while not self.stopped.is_set():
                try:
                    conn = self._connect()
                except Exception:
                    self.stopped.wait(0.25)
                    continue
                with self.lock:
                    old, self.conn, self.since = self.conn, conn, time.monotonic()
                    if self.stopped.is_set():  # released meanwhile: this session is not kept
                        conn.close()
                old.close()
                break

    def release(self) -> None:
        self.stopped.set()
        if self.pid == os.getpid():
            with self.lock:
                self.conn.close()


_OTHERS: Final = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND pid <> pg_backend_pid()
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = %(table)s::bigint::oid
)
"""


def _int4(oid: int) -> int:
    """An oid (unsigned 32 bits) as the signed key ``pg_advisory_lock(int4, int4)`` takes."""
    return oid - 2**32 if oid >= 2**31 else oid
