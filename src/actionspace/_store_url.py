"""Store URLs: the ``sqlite://`` form that the trace, ledger and approval stores share.

``sqlite:///abs/path.db`` names an absolute file, ``sqlite://relative/path.db`` one relative to
the working directory; ``~`` is expanded. Opening each kind of store stays with that store.
"""

from __future__ import annotations

from pathlib import Path

from actionspace.errors import ConfigurationError

__all__ = ["sqlite_path"]


def sqlite_path(url: str) -> Path:
    """The file a ``sqlite://`` URL names, with ``~`` expanded; raises ConfigurationError if none."""
    if not url.lower().startswith("sqlite://"):
        raise ConfigurationError(f"not a sqlite:// URL: {url!r}")
    raw = url[len("sqlite://") :]
    if raw in ("", "/") or raw.endswith("/"):
        raise ConfigurationError(f"{url!r} names no database file; expected e.g. sqlite:///var/trace.db")
    if raw in (":memory:", "/:memory:"):
        raise ConfigurationError("use memory:// for a store in memory, not sqlite://:memory:")
    return Path(raw).expanduser()
