"""Optional parts and the extra that installs each: a missing one is a one-line error naming the command.

``pip install actionspace`` is the library with SQLite; PostgreSQL, MCP, the service, durable plans,
OpenTelemetry, evaluation suites, embeddings and the framework adapters are extras.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Final

from actionspace.errors import ConfigurationError

__all__ = ["EXTRAS", "missing", "require"]

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


def missing(what: str, extra: str, exc: ImportError | None = None) -> ConfigurationError:
    """The error for ``what`` needing ``extra``: one line, naming the pip command."""
    module = f" (no module {exc.name!r})" if exc is not None and exc.name else ""
    return ConfigurationError(f"{what} needs the {extra} extra{module}: pip install 'actionspace[{extra}]'")


def require(module: str, extra: str, what: str | None = None) -> ModuleType:
    """Import ``module``, or raise ConfigurationError naming ``pip install 'actionspace[extra]'``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing(what or module, extra, exc) from exc
