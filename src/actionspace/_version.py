"""The installed distribution's version, read from its metadata (``pyproject.toml`` is the one source)."""

from __future__ import annotations

from functools import cache
from importlib.metadata import PackageNotFoundError, version

__all__ = ["UNKNOWN_VERSION", "package_version"]

UNKNOWN_VERSION = "0+unknown"
"""What :func:`package_version` answers when actionspace runs without being installed."""


@cache
def package_version() -> str:
    """The version of the installed ``actionspace`` distribution, or :data:`UNKNOWN_VERSION`."""
    try:
        return version("actionspace")
    except PackageNotFoundError:
        return UNKNOWN_VERSION
