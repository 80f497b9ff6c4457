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

A look leaves out every mark of this very process (several runtimes on one store): its sends are
in the process's registry of sends in flight (:func:`actionspace.ledger.recover.in_flight_here`),
which every settling consults before it acts, so another runtime here is no reason to wait.

What a PostgreSQL look cannot see: a process whose mark session alone the server ended while the
process and the look's own session live. :data:`PG_SETTLED_S` guards the looker's session, not that
one, so until its watcher takes the mark again a look answers "none" for it. Ended by the server
(``pg_terminate_backend`` of that one backend), the session's goodbye wakes the watcher at once:
the window is one new connection long. Cut from the network, the session stays held until the
server's own keepalives give up on it (``tcp_keepalives_*``, by default the operating system's: two
hours): a cut shorter than that is never seen; one longer leaves the process unseen until it can
reach the server again, and its send in flight (at most its tool's holder window) could be settled
beside it. No look made from the server's side tells a cut process from a killed one; only the
server's keepalive settings bound that window. ``idle_session_timeout`` is turned off on the mark
session: it would end it again and again.

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
import weakref
from collections.abc import Callable, Collection
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
    def others_alive(self, mine: Collection[_Mark], wait: bool) -> bool: ...
    def release(self) -> None: ...


_MARKS: dict[int, tuple[Callable[[], object], _Mark]] = {}
"""id(ledger store) → (a reference to that store, this process's mark on it), while the store is
open: an id is a store's only while the reference still finds it (ids of collected objects return)."""
_OURS: dict[int, _Mark] = {}
"""id(mark) → every mark this process holds, also one whose store closed but whose drop waits for a
send still running here: none of them is another process's."""
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
        _MARKS[id(store)] = (_reference(store), mark)
        _OURS[id(mark)] = mark

    def release() -> None:
        with _MARKS_LOCK:
            held = _MARKS.get(id(store))
            if held is None or held[1] is not mark:
                return
            del _MARKS[id(store)]
        _release_when_idle(mark, busy)

    return release


def _reference(store: object) -> Callable[[], object]:
    """A weak reference to ``store`` (a strong one for an object that takes none)."""
    try:
        return weakref.ref(store)
    except TypeError:
        return lambda: store


def _release_when_idle(mark: _Mark, busy: Callable[[], bool]) -> None:
    """Drop ``mark`` now, or once ``busy()`` is False (looked at every second)."""
    if not busy():
        mark.release()
        with _MARKS_LOCK:
            _OURS.pop(id(mark), None)
        return
    later = threading.Timer(1.0, _release_when_idle, (mark, busy))
    later.daemon = True
    later.start()


def others_alive(store: object, *, wait: bool = False) -> bool:
    """Whether a process other than this one may hold sends of ``store``: False only when none can.
    ``wait``: a PostgreSQL mark session too young to trust "none" (:data:`PG_SETTLED_S`) looks all
    the same; when it finds no other process it waits until it is that old (at most that long) and
    looks again, rather than answering "alive" at once."""
    with _MARKS_LOCK:
        held = _MARKS.get(id(store))
        mine = tuple(_OURS.values())
    if held is None or held[0]() is not store:
        return True
    try:
        return held[1].others_alive(mine, wait)
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

    def others_alive(self, mine: Collection[_Mark], wait: bool) -> bool:
        if self.fd is None or self.pid != os.getpid():  # no working lock, or a forked child
            return True
        if time.monotonic() < self.alive_until:
            return True
        ours = {m.file.name for m in mine if isinstance(m, _FileMark) and m.dir == self.dir and m.holds()}
        alive = False
        for name in os.listdir(self.dir):
            if name == self.file.name or name in ours:
                continue
            path = self.dir / name
            if name.endswith(".tmp"):  # not yet a mark: its process has written nothing through it
                _remove_if_stale(path)
            elif not name.endswith(".lock") or _probe(path) != "dead":
                alive = True  # a live process, a file system that cannot tell, or a file not ours
        if alive:
            self.alive_until = time.monotonic() + LOOK_EVERY_S
        return alive

    def holds(self) -> bool:
        """Its lock is held by this very process (not released, not inherited by a fork)."""
        return self.fd is not None and self.pid == os.getpid()

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
            conn.execute(_NEVER_IDLE_OUT)
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

    def others_alive(self, mine: Collection[_Mark], wait: bool) -> bool:
        if self.pid != os.getpid() or self.stopped.is_set():
            return True
        if time.monotonic() < self.alive_until:
            return True
        ours = [
            m.session()
            for m in mine
            if isinstance(m, _SessionMark) and (m.url, m.table) == (self.url, self.table)
        ]
        known = {"table": self.table, "pids": [p for p, _ in ours if p], "numbers": [n for p, n in ours if p]}
        while True:
            with self.lock:
                young = PG_SETTLED_S - (time.monotonic() - self.since)  # inf while it is taken again
                if (young > 0 and not wait) or young > PG_SETTLED_S:  # a restart may have dropped marks
                    return True
                alive = bool(self.conn.execute(_OTHERS, known).fetchone()[0])
            if alive:  # seen: true whatever the session's age
                self.alive_until = time.monotonic() + LOOK_EVERY_S
                return True
            if young <= 0:
                return False
            if self.stopped.wait(young):  # "none" is trusted once the session is settled: look again
                return True
            wait = False

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

    def session(self) -> tuple[int, int]:
        """(backend pid, lock number) of the session holding the mark now; pid 0 when there is none
        or it is not this very process's (a forked child)."""
        conn = self.conn
        if self.pid != os.getpid() or self.stopped.is_set() or conn is None or conn.closed:
            return 0, self.number
        return int(conn.info.backend_pid), self.number

    def release(self) -> None:
        self.stopped.set()
        if self.pid == os.getpid():
            with self.lock:
                self.conn.close()


_NEVER_IDLE_OUT: Final = """
SELECT set_config('idle_session_timeout', '0', false)
WHERE current_setting('server_version_num')::int >= 140000
"""
"""A mark session is idle by design: a server's ``idle_session_timeout`` (PostgreSQL 14+) would end
it again and again, each time leaving this live process unseen until its watcher took it again."""

_OTHERS: Final = """
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND pid <> pg_backend_pid()
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid = %(table)s::bigint::oid
      AND NOT EXISTS (
          SELECT 1 FROM unnest(%(pids)s::int[], %(numbers)s::bigint[]) AS ours(pid, number)
          WHERE ours.pid = pg_locks.pid AND ours.number = pg_locks.objid::bigint
      )
)
"""
"""Whether a session of another process holds a mark on the ledger table: this process's own mark
sessions (backend pid and lock number, both: a pid alone could be another server's) are left out."""


def _int4(oid: int) -> int:
    """An oid (unsigned 32 bits) as the signed key ``pg_advisory_lock(int4, int4)`` takes."""
    return oid - 2**32 if oid >= 2**31 else oid
