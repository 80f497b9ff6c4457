"""Optional parts and the extra that installs each: a missing one is a one-line error naming the command.

``pip install actionspace`` is the library with SQLite; PostgreSQL, MCP, the service, durable plans,
OpenTelemetry, evaluation suites, embeddings and the framework adapters are extras.

The error is :class:`MissingExtraError`: a ConfigurationError (what every caller catches) and an
ImportError, so a module that cannot be imported without its extra (``adapters.mcp_client``,
``trace.otel``) raises it at import and ``except ImportError`` around that import still holds.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from actionspace.errors import ConfigurationError

__all__ = ["EXTRAS", "MissingExtraError", "missing", "require"]

EXTRAS: Final = (
    "postgres",
    "mcp",
    "service",
    "durable",
    "otel",
    "eval",
    "embeddings",
    "openai-agents",
    "pydantic-ai",
    "langgraph",
    "all",
)
"""The extras of the ``actionspace`` distribution (pyproject.toml)."""


class MissingExtraError(ConfigurationError, ImportError):
    """An optional part needs an extra that is not installed; ``name`` is the module not found."""


def missing(what: str, extra: str, exc: ImportError | None = None) -> MissingExtraError:
    """The error for ``what`` needing ``extra``: one line, naming the pip command (raise it, ``from exc``)."""
    name = exc.name if exc is not None else None
    module = f" (no module {name!r})" if name else ""
    said = f"{what} needs the {extra} extra{module}: pip install 'actionspace[{extra}]'"
    return MissingExtraError(said, name=name)


def require(module: str, extra: str, what: str | None = None) -> ModuleType:
    """Import ``module``, or raise MissingExtraError (a ConfigurationError) naming
    ``pip install 'actionspace[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(what or module, extra, exc) from exc
