"""Trimming rules, chosen by content kind and named ``<kind>-v<version>``."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from actionspace.observation.rules._base import MIN_MAX_BYTES, Source, TrimRule, is_stream
from actionspace.observation.rules.json import JsonRule
from actionspace.observation.rules.log import LogRule
from actionspace.observation.rules.search import SearchRule
from actionspace.observation.rules.web import WebRule

__all__ = [
    "MIN_MAX_BYTES",
    "RULES",
    "JsonRule",
    "LogRule",
    "SearchRule",
    "Source",
    "TrimRule",
    "WebRule",
    "is_stream",
]

RULES: Final[Mapping[str, type[TrimRule]]] = MappingProxyType(
    {rule.key(): rule for rule in (LogRule, SearchRule, WebRule, JsonRule)}
)
"""Every rule by the name a tool's ``trim`` setting uses: ``log-v1``, ``search-v1``, ``web-v1``,
``json-v1``."""
