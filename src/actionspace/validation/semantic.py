"""Semantic argument types: values that must mean more than their JSON shape says.

Each type is usable two ways:

* as a type hint on a Python tool (``start: Timestamp``, ``path: Annotated[str, PathWithin("/srv")]``),
  which puts an ``x-actionspace`` marker in the generated JSON Schema;
* as that marker written by hand into a JSON Schema
  (``{"type": "string", "x-actionspace": {"type": "timestamp"}}``).

The validator compiles every marker of a schema once into a checker (see :func:`compile_checkers`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

__all__ = [
    "MARKER",
    "URL",
    "Currency",
    "Money",
    "PathWithin",
    "ResourceKind",
    "ResourceRef",
    "SemanticCheck",
    "Timestamp",
    "UrlRule",
    "compile_checkers",
]

MARKER = "x-actionspace"


class ResourceRef(BaseModel):
    """A stable reference to a versioned resource: the id and the version the model observed."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", json_schema_extra={MARKER: {"type": "resource_ref"}}
    )
    id: str = Field(min_length=1)
    version: str = Field(min_length=1)


class Money(BaseModel):
    """An amount in a currency (ISO 4217 code). Amounts are decimals, never binary floats."""

    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra={MARKER: {"type": "money"}})
    amount: Decimal
    currency: str = Field(pattern=r"^[A-Z]{3}$")


Timestamp = Annotated[AwareDatetime, Field(json_schema_extra={MARKER: {"type": "timestamp"}})]
"""An ISO 8601 date-time that must carry a UTC offset (``2026-12-01T15:00:00+08:00``)."""


class _Marker:
    """Base of the ``Annotated`` markers: adds its dict under ``x-actionspace`` in the schema."""

    def marker(self) -> dict[str, Any]:
        raise NotImplementedError

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema = dict(schema)
        existing = schema.get(MARKER, {})
        schema[MARKER] = {**existing, **self.marker()}
        return schema


@dataclass(frozen=True, slots=True)
class PathWithin(_Marker):
    """A file path that must stay inside ``root`` after normalization and symlinks."""

    root: str

    def marker(self) -> dict[str, Any]:
        return {"type": "path", "root": self.root}


@dataclass(frozen=True, slots=True)
class Currency(_Marker):
    """A :class:`Money` argument that must be in this currency."""

    code: str

    def marker(self) -> dict[str, Any]:
        return {"type": "money", "currency": self.code}


@dataclass(frozen=True, slots=True)
class ResourceKind(_Marker):
    """A :class:`ResourceRef` of this kind; checked against the runtime's current version."""

    kind: str

    def marker(self) -> dict[str, Any]:
        return {"type": "resource_ref", "kind": self.kind}


@dataclass(frozen=True, slots=True)
class UrlRule(_Marker):
    """A URL restricted to some schemes (default http/https) and optionally some hosts."""

    schemes: tuple[str, ...] = ("http", "https")
    hosts: tuple[str, ...] | None = None

    def marker(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "url", "schemes": list(self.schemes)}
        if self.hosts is not None:
            out["hosts"] = list(self.hosts)
        return out


URL = Annotated[str, UrlRule()]
"""An absolute http(s) URL."""


@dataclass(frozen=True, slots=True)
class SemanticCheck:
    """One compiled check: where it applies and what it runs.

    ``check(value)`` returns None when the value is fine, else the reason (for ``invalid_arguments``).
    Resource references are not checked here: their version is live state (see ``resource_kind``).
    """

    path: tuple[str, ...]
    """Property names from the arguments' root; ``"*"`` stands for every item of an array."""
    kind: str
    check: Callable[[Any], str | None]
    resource_kind: str | None = None

    def values(self, args: Any) -> Iterator[tuple[str, Any]]:
        """Every (JSON pointer, value) of ``args`` this check applies to."""
        yield from _walk(args, self.path, "")


def _walk(node: Any, path: tuple[str, ...], pointer: str) -> Iterator[tuple[str, Any]]:
    if not path:
        yield pointer, node
        return
    head, rest = path[0], path[1:]
    if head == "*":
        if isinstance(node, list):
            for i, item in enumerate(node):
                yield from _walk(item, rest, f"{pointer}/{i}")
    elif isinstance(node, dict) and head in node:
        yield from _walk(node[head], rest, f"{pointer}/{_escape(head)}")


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _check_timestamp(value: Any) -> str | None:
    if isinstance(value, datetime):
        return None if value.tzinfo is not None else "timestamp needs a UTC offset"
    if not isinstance(value, str):
        return None  # the JSON Schema type check reports it
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return f"not an ISO 8601 timestamp: {value[:64]!r}"
    if parsed.tzinfo is None:
        return f"timestamp {value[:64]!r} has no UTC offset; write it as e.g. {value[:19]}+08:00"
    return None


_MINOR_UNITS = {"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0, "BHD": 3, "KWD": 3, "JOD": 3, "OMR": 3}


def _money_check(currency: str | None) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, Money):
            value = {"amount": value.amount, "currency": value.currency}
        if not isinstance(value, dict):
            return None
        code = value.get("currency")
        if currency is not None and code != currency:
            return f"currency must be {currency}, got {code!r}"
        raw = value.get("amount")
        if isinstance(raw, bool) or not isinstance(raw, int | float | str | Decimal):
            return None
        try:
            amount = Decimal(str(raw))
        except InvalidOperation:
            return f"amount {str(raw)[:32]!r} is not a decimal number"
        if not amount.is_finite():
            return "amount must be finite"
        exponent = amount.as_tuple().exponent
        places = _MINOR_UNITS.get(str(code), 2)
        if isinstance(exponent, int) and -exponent > places:
            return f"{code} amounts have at most {places} decimal places"
        return None

    return check


def _path_check(root: str) -> Callable[[Any], str | None]:
    real_root = os.path.realpath(root)

    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if "\x00" in value:
            return "path contains a NUL byte"
        target = os.path.realpath(os.path.join(real_root, value))
        if target != real_root and not target.startswith(real_root + os.sep):
            return f"path escapes its root {root!r}"
        return None

    return check


def _url_check(schemes: Sequence[str], hosts: Sequence[str] | None) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        try:
            parts = urlsplit(value)
            host = parts.hostname
        except ValueError as exc:
            return f"not a URL: {exc}"
        if parts.scheme not in schemes:
            return f"URL scheme must be one of {sorted(schemes)}, got {parts.scheme!r}"
        if not host:
            return "URL has no host"
        if hosts is not None and host not in hosts:
            return f"URL host {host!r} is not allowed"
        return None

    return check


def _no_check(value: Any) -> str | None:
    return None


def _checker_for(marker: Mapping[str, Any]) -> Callable[[Any], str | None] | None:
    kind = marker.get("type")
    if kind == "timestamp":
        return _check_timestamp
    if kind == "money":
        return _money_check(marker.get("currency"))
    if kind == "path":
        return _path_check(str(marker.get("root", ".")))
    if kind == "url":
        return _url_check(tuple(marker.get("schemes", ("http", "https"))), marker.get("hosts"))
    if kind == "resource_ref":
        return _no_check
    return None


def compile_checkers(schema: Mapping[str, Any]) -> tuple[SemanticCheck, ...]:
    """Every semantic check that a schema's ``x-actionspace`` markers ask for."""
    defs: Mapping[str, Any] = schema.get("$defs", schema.get("definitions", {})) or {}
    found: dict[tuple[str, ...], dict[str, Any]] = {}
    _collect(schema, (), defs, found, depth=0)
    out: list[SemanticCheck] = []
    for path, marker in found.items():
        check = _checker_for(marker)
        if check is None:
            continue
        kind = str(marker["type"])
        resource_kind = str(marker.get("kind", "")) or None if kind == "resource_ref" else None
        out.append(SemanticCheck(path=path, kind=kind, check=check, resource_kind=resource_kind))
    return tuple(out)


def _collect(
    node: Any,
    path: tuple[str, ...],
    defs: Mapping[str, Any],
    found: dict[tuple[str, ...], dict[str, Any]],
    depth: int,
) -> None:
    if not isinstance(node, Mapping) or depth > 32:
        return
    marker = node.get(MARKER)
    if isinstance(marker, Mapping) and "type" in marker:
        # A field-level marker refines the type-level one (``Currency`` on a ``Money``).
        found[path] = {**dict(marker), **found.get(path, {})}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
        _collect(defs.get(ref.rsplit("/", 1)[1]), path, defs, found, depth + 1)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in node.get(key, ()) or ():
            _collect(sub, path, defs, found, depth + 1)
    for name, sub in (node.get("properties") or {}).items():
        _collect(sub, (*path, name), defs, found, depth + 1)
    items = node.get("items")
    if isinstance(items, Mapping):
        _collect(items, (*path, "*"), defs, found, depth + 1)
