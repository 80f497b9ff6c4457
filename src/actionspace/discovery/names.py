"""The names tools are offered under: ones every provider takes.

OpenAI (Chat Completions and Responses) and Anthropic take a tool name only if it matches
``^[a-zA-Z0-9_-]{1,64}$``, and refuse the whole request otherwise; a catalog may hold other names
(MCP servers name tools ``files.read``). Such a tool is offered as its name with every other
character replaced by ``_``, cut to fit, and a digest of the name appended: two tools never share
an offered name, and the name is the same in every process (a run continued elsewhere maps the
model's calls without offering again). A name the providers take is offered as it is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container, Iterable, Mapping
from typing import Final

__all__ = ["ProviderNames", "offered_name"]

_TAKEN: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_REFUSED_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(name: str, registered: Container[str] = frozenset()) -> str:
    """The name ``name`` is offered under (``name`` itself when the providers take it).

    ``registered``: the catalog's names; an offered name never equals one of them.
    """
    if _TAKEN.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    base = _REFUSED_CHARS.sub("_", name)
    short = f"{base[:55]}_{digest[:8]}"
    return short if short not in registered else f"{base[:47]}_{digest[:16]}"


class ProviderNames:
    """Offered name ↔ tool name for one catalog state (rebuilt when the catalog changes)."""

    __slots__ = ("_offered", "_tools", "generation")

    def __init__(self, generation: int, names: Iterable[str]) -> None:
        self.generation = generation
        registered = frozenset(names)
        self._offered: dict[str, str] = {}
        self._tools: dict[str, str] = {}
        for name in sorted(registered):
            offered = offered_name(name, registered)
            if offered != name:
                self._offered[name] = offered
                self._tools[offered] = name

    @property
    def renamed(self) -> Mapping[str, str]:
        """Offered name → tool name, for the tools offered under another name than their own."""
        return self._tools

    def offered(self, name: str) -> str:
        """The name the tool ``name`` is offered under."""
        return self._offered.get(name, name)

    def tool(self, offered: str) -> str:
        """The tool an offered name stands for (``offered`` itself when it is no other's)."""
        return self._tools.get(offered, offered)
