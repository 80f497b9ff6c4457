"""The names tools are offered under: ones every provider takes.

OpenAI (Chat Completions and Responses) and Anthropic take a tool name only if it matches
``^[a-zA-Z0-9_-]{1,64}$``, Gemini only if it starts with a letter or ``_`` (then letters, digits,
``_ . : -``, at most 64), and each refuses the whole request otherwise; a catalog may hold other
names (MCP servers name tools ``files.read``, a tool may be named ``1st_step``). Such a tool is
offered as its name with every other character replaced by ``_`` (after a ``_`` when it does not
begin with a letter), cut to fit, and a digest of the name appended: two tools never share an
offered name, and the name is the same in every process (a run continued elsewhere maps the
model's calls without offering again). A name every provider takes
(``^[A-Za-z_][A-Za-z0-9_-]{0,63}$``) is offered as it is.

A ``describe_tool`` call names the tool to describe by the name it was offered under (the short
definition says so): :meth:`ProviderNames.called` maps that argument back as well. An error the
model reads points it at tools by their offered names (:meth:`ProviderNames.shown`): a name it
follows from a suggestion is one the provider takes in the conversation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Container, Iterable, Mapping
from typing import Final

from actionspace.discovery.disclosure import DESCRIBE_TOOL
from actionspace.types import Observation, ToolCall

__all__ = ["ProviderNames", "offered_name"]

_TAKEN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_REFUSED_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(name: str, registered: Container[str] = frozenset()) -> str:
    """The name ``name`` is offered under (``name`` itself when the providers take it).

    ``registered``: the catalog's names; an offered name never equals one of them.
    """
    if _TAKEN.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    base = _REFUSED_CHARS.sub("_", name)
    base = base if base[:1].isalpha() or base[:1] == "_" else "_" + base  # Gemini: a letter or _ first
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

    def called(self, call: ToolCall) -> ToolCall:
        """``call`` naming the tool its name was offered for (``call`` itself when it names no
        other); a ``describe_tool`` call asking for an offered name asks for the tool it stands for."""
        if type(call.name) is not str:
            return call
        tool = self.tool(call.name)
        if tool == DESCRIBE_TOOL:
            return self._describing(call)
        return call if tool == call.name else dataclasses.replace(call, name=tool)

    def _describing(self, call: ToolCall) -> ToolCall:
        """``call`` (of ``describe_tool``) with its ``tool`` argument naming the tool itself."""
        arguments = call.arguments
        asked = arguments.get("tool") if type(arguments) is dict else None
        if type(asked) is not str:
            return call
        base, at, version = asked.partition("@")
        tool = self.tool(base)
        if tool == base:
            return call
        renamed = {**arguments, "tool": tool + at + version}
        return dataclasses.replace(call, name=DESCRIBE_TOOL, arguments=renamed)

    def shown(self, obs: Observation) -> Observation:
        """``obs`` as the model reads it: its tool named as offered (the name a Gemini
        ``functionResponse`` answers under is the one the model called), and the tools its error
        points at (``alternatives``, and the tool a disclosure run asks to describe first) too, in
        its message as well. The observation the host keeps names the catalog's tools."""
        tool = self._offered.get(obs.tool) if type(obs.tool) is str else None
        if tool is not None:
            obs = dataclasses.replace(obs, tool=tool)
        error = obs.error
        if error is None or not self._offered:
            return obs
        named = [a for a in error.alternatives if type(a) is str]
        tool = error.details.get("tool") if error.category == "unknown_tool" else None
        if type(tool) is str:
            named.append(tool)
        renames = {n: self._offered[n] for n in named if n in self._offered}
        if not renames:
            return obs
        message = error.message
        for name, offered in renames.items():
            message = message.replace(repr(name), repr(offered))
        alternatives = tuple(renames.get(a, a) if type(a) is str else a for a in error.alternatives)
        named_error = dataclasses.replace(error, message=message, alternatives=alternatives)
        return dataclasses.replace(obs, error=named_error)
