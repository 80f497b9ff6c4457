"""Store URLs: the ``sqlite://`` form that the trace, ledger and approval stores share.

SQLAlchemy's convention (which DBOS and most of the field use): after ``sqlite://`` comes an empty
host, then ``/``, then the path — so ``sqlite:///relative/path.db`` names a file relative to the
working directory and ``sqlite:////abs/path.db`` an absolute one; ``~`` is expanded. Anything
between ``sqlite://`` and the third slash would be a host, which SQLite has none of: refused.
Opening each kind of store stays with that store.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

from actionspace.errors import ConfigurationError

__all__ = ["shown_url", "sqlite_path", "sqlite_reading_uri", "sqlite_url"]

_SCHEME = "sqlite://"


_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:@/?#]*):[^@/]*@", re.I)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.I)


def shown_url(url: str) -> str:
    """``url`` as it may be printed or logged: a password (``user:pw@`` or ``?password=``) as ``***``.

    A store URL often comes from ``ACTIONSPACE_STORE``, kept out of the shell's history for this reason.
    """
    if url.partition("://")[0].lower() in ("sqlite", "memory"):
        return url
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", url, count=1))


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite://`` URL names, with ``~`` expanded; raises ConfigurationError if none."""
    if not url.lower().startswith(_SCHEME):
        raise ConfigurationError(f"not a sqlite:// URL: {url!r}")
    rest = url[len(_SCHEME) :]
    if rest in (":memory:", "/:memory:"):
        raise ConfigurationError("use memory:// for a store in memory, not sqlite://:memory:")
    if rest and not rest.startswith("/"):
        raise ConfigurationError(
            f"{url!r} names a host, not a file: write sqlite:///{rest} (relative to the working "
            f"directory) or sqlite:////abs/{rest.rsplit('/', 1)[-1]} (absolute)"
        )
    raw = rest[1:]
    if raw in ("", "/") or raw.endswith("/"):
        raise ConfigurationError(f"{url!r} names no database file; expected e.g. sqlite:///actionspace.db")
    return Path(raw).expanduser()


def sqlite_url(path: Path | str) -> str:
    """The URL of ``path``: ``sqlite:////abs.db`` when absolute, ``sqlite:///rel.db`` when not."""
    return f"{_SCHEME}/{Path(path).as_posix()}"


def sqlite_reading_uri(path: Path) -> str:
    """The URI that opens the existing file ``path`` without creating it (``mode=rw``).

    Not ``mode=ro``: a read-only connection that is the last to close a WAL file leaves its
    ``-wal`` and ``-shm`` files behind. A caller that must not write sets ``PRAGMA query_only``.
    """
    return f"file:{quote(str(path.absolute()), safe='/')}?mode=rw"
