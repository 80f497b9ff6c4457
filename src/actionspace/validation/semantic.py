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
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Annotated, Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from actionspace.errors import ConfigurationError
from actionspace.validation.schema_walk import Walk, compile_walk
from actionspace.validation.urls import url_check

__all__ = [
    "MARKER",
    "MAX_MONEY_DIGITS",
    "URL",
    "Currency",
    "Money",
    "PathWithin",
    "ResourceKind",
    "ResourceRef",
    "SemanticChecks",
    "Timestamp",
    "UrlRule",
    "canonical_path",
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
    """A URL restricted to some schemes and optionally some hosts (see
    :mod:`actionspace.validation.urls` for how hosts are compared).

    ``schemes``: the allowed schemes (default http and https). ``hosts``: the allowed hosts
    (names or IP addresses; default: any). ``allow_internal``: accept hosts that are not public
    (loopback, private, link-local and metadata addresses, ``localhost``) when ``hosts`` is not
    given (default False: refused; a host that ``hosts`` lists is always allowed). Raises
    :class:`~actionspace.errors.ConfigurationError` when a listed host names no host.
    """

    schemes: tuple[str, ...] = ("http", "https")
    hosts: tuple[str, ...] | None = None
    allow_internal: bool = False

    def __post_init__(self) -> None:
        url_check(self.schemes, self.hosts, allow_internal=self.allow_internal)

    def marker(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "url", "schemes": list(self.schemes)}
        if self.hosts is not None:
            out["hosts"] = list(self.hosts)
        if self.allow_internal:
            out["allow_internal"] = True
        return out


URL = Annotated[str, UrlRule()]
"""An absolute http(s) URL of a public host."""


@dataclass(frozen=True, slots=True)
class SemanticChecks:
    """Every semantic check of one schema, found through its compiled walk.

    At one value, the markers of every subschema that applies are merged per type, the outermost
    winning (a field's ``Currency("EUR")`` refines the ``Money`` model's marker).
    """

    walk: Walk

    @property
    def empty(self) -> bool:
        """True when the schema has no marker at all."""
        return not self.walk.marked

    @property
    def kinds(self) -> frozenset[str]:
        """The marker types present."""
        return frozenset(str(n.marker["type"]) for n in self.walk.marked if n.marker is not None)

    def markers(self, args: Any) -> Iterator[tuple[tuple[str | int, ...], Any, Mapping[str, Any]]]:
        """Every (segments, value, merged marker) of ``args``, parents before children."""
        pending: dict[tuple[str | int, ...], tuple[Any, dict[str, dict[str, Any]]]] = {}
        order: list[tuple[str | int, ...]] = []
        for loc in self.walk.locate(args):
            assert loc.node.marker is not None
            if loc.segments not in pending:
                pending[loc.segments] = (loc.value, {})
                order.append(loc.segments)
            merged = pending[loc.segments][1]
            kind = str(loc.node.marker["type"])
            merged[kind] = {**dict(loc.node.marker), **merged.get(kind, {})}
        for segments in order:
            value, by_kind = pending[segments]
            for marker in by_kind.values():
                yield segments, value, marker

    def canonical(self, args: Any) -> Any:
        """``args`` with every marked path in canonical form (``./a/../b.json`` -> ``b.json``).

        Returns ``args`` itself when nothing changes; never mutates it.
        """
        out = args
        for segments, value, marker in list(self.markers(args)):
            if marker.get("type") != "path" or not isinstance(value, str):
                continue
            fixed = canonical_path(str(marker.get("root", ".")), value)
            if fixed != value:
                out = _replace(out, segments, fixed)
        return out

    def problems(self, args: Any) -> Iterator[tuple[str, str]]:
        """Every (JSON pointer, reason) of a marked value that fails its check."""
        for segments, value, marker in self.markers(args):
            check = _checker(marker)
            reason = check(value) if check is not None else None
            if reason is not None:
                yield _pointer(segments), reason

    def resource_refs(self, args: Any) -> Iterator[tuple[str, str, Any]]:
        """Every (JSON pointer, kind, value) of a ``ResourceRef`` argument, to check for staleness."""
        for segments, value, marker in self.markers(args):
            if marker.get("type") == "resource_ref" and isinstance(value, Mapping):
                yield _pointer(segments), str(marker.get("kind", "")), value


def _pointer(segments: Sequence[str | int]) -> str:
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in segments)


def _replace(node: Any, segments: Sequence[str | int], value: Any) -> Any:
    """A copy of ``node`` with ``value`` at ``segments`` (only the containers on the way are copied)."""
    if not segments:
        return value
    head, rest = segments[0], segments[1:]
    if isinstance(node, list) and isinstance(head, int):
        out_list = list(node)
        out_list[head] = _replace(node[head], rest, value)
        return out_list
    if isinstance(node, Mapping):
        out = dict(node)
        out[head] = _replace(node[head], rest, value)
        return out
    return node


def canonical_path(root: str, value: str) -> str:
    """``value`` normalized against ``root``: relative to it, without ``.``/``..`` or repeated ``/``.

    A path that stays inside ``root`` lexically comes back relative to it (``"."`` for the root);
    one that leaves it comes back unchanged (the path check rejects it).
    """
    if "\x00" in value or not value:
        return value
    base = os.path.abspath(root)
    joined = os.path.normpath(os.path.join(base, value))
    if joined == base:
        return "."
    if joined.startswith(base.rstrip(os.sep) + os.sep):
        return os.path.relpath(joined, base)
    return value


def _check_timestamp(value: Any) -> str | None:
    if isinstance(value, datetime):
        return _in_range(value) if value.tzinfo is not None else "timestamp needs a UTC offset"
    if not isinstance(value, str):
        return None  # the JSON Schema type check reports it
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return f"not an ISO 8601 timestamp: {value[:64]!r}"
    if parsed.tzinfo is None:
        return f"timestamp {value[:64]!r} has no UTC offset; write it as e.g. {value[:19]}+08:00"
    return _in_range(parsed)


def _in_range(moment: datetime) -> str | None:
    """None when ``moment`` converts to UTC, the reason otherwise (year 1 at +01:00 does not)."""
    try:
        moment.astimezone(UTC)
    except (OverflowError, ValueError):
        return f"timestamp {moment.isoformat()[:64]!r} is out of range once converted to UTC"
    return None


MAX_MONEY_DIGITS = 18
"""Most integer digits of a money amount (below 10^18 units): ``1E+999999999`` is refused."""
_MAX_AMOUNT_CHARS = 64

_CURRENCY_CODE = re.compile(r"[A-Z]{3}")
_PLAIN_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

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
        if not isinstance(code, str) or _CURRENCY_CODE.fullmatch(code) is None:
            return f"currency must be a three-letter ISO 4217 code, got {str(code)[:16]!r}"
        raw = value.get("amount")
        if isinstance(raw, bool) or not isinstance(raw, int | float | str | Decimal):
            return None
        text = str(raw)
        if len(text) > _MAX_AMOUNT_CHARS:
            return f"amount has more than {_MAX_AMOUNT_CHARS} characters"
        if isinstance(raw, str) and _PLAIN_DECIMAL.fullmatch(raw) is None:
            # Decimal() also reads " 1", "1_000" and other scripts' digits; the tool may not
            return f"amount {text[:32]!r} is not a plain decimal number (digits 0-9, '.', an exponent)"
        try:
            amount = Decimal(text)
        except InvalidOperation:
            return f"amount {text[:32]!r} is not a decimal number"
        if not amount.is_finite():
            return "amount must be finite"
        if not amount and amount.is_signed():
            return "amount is negative zero; write 0"
        if amount and amount.adjusted() >= MAX_MONEY_DIGITS:
            return f"amount must be below 10^{MAX_MONEY_DIGITS} in magnitude"
        exponent = amount.as_tuple().exponent
        places = _MINOR_UNITS.get(str(code), 2)
        if isinstance(exponent, int) and -exponent > places:
            return f"{code} amounts have at most {places} decimal places"
        return None

    return check


def _path_check(root: str) -> Callable[[Any], str | None]:
    real_root = os.path.realpath(root)
    inside = real_root if real_root.endswith(os.sep) else real_root + os.sep  # the root "/" ends so

    def check(value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if "\x00" in value:
            return "path contains a NUL byte"
        target = os.path.realpath(os.path.join(real_root, value))
        if target != real_root and not target.startswith(inside):
            return f"path escapes its root {root!r}"
        return None

    return check


def _no_check(value: Any) -> str | None:
    return None


_KINDS = frozenset({"timestamp", "money", "path", "url", "resource_ref"})


def _checker_for(marker: Mapping[str, Any]) -> Callable[[Any], str | None] | None:
    kind = marker.get("type")
    if kind == "timestamp":
        return _check_timestamp
    if kind == "money":
        return _money_check(marker.get("currency"))
    if kind == "path":
        return _path_check(str(marker.get("root", ".")))
    if kind == "url":
        hosts, schemes = marker.get("hosts"), marker.get("schemes", ("http", "https"))
        if isinstance(schemes, str) or not isinstance(schemes, list | tuple):
            raise ConfigurationError(f"a url marker's schemes must be a list, got {schemes!r}")
        if hosts is not None and (isinstance(hosts, str) or not isinstance(hosts, list | tuple)):
            raise ConfigurationError(f"a url marker's hosts must be a list, got {hosts!r}")
        return url_check(
            tuple(str(s) for s in schemes),
            None if hosts is None else tuple(hosts),
            allow_internal=marker.get("allow_internal") is True,
        )
    if kind == "resource_ref":
        return _no_check
    return None


_CHECKERS: dict[str, Callable[[Any], str | None] | None] = {}


def _checker(marker: Mapping[str, Any]) -> Callable[[Any], str | None] | None:
    """The check of one merged marker (compiled once per distinct marker)."""
    key = repr(sorted(marker.items()))
    if key not in _CHECKERS:
        if len(_CHECKERS) >= 4096:
            _CHECKERS.clear()
        _CHECKERS[key] = _checker_for(marker)
    return _CHECKERS[key]


def compile_checkers(schema: Mapping[str, Any]) -> SemanticChecks:
    """Every semantic check that a schema's ``x-actionspace`` markers ask for.

    Raises :class:`~actionspace.errors.ConfigurationError` when a marker sits where no value is
    checked (see :mod:`actionspace.validation.schema_walk`) or names an unknown type.
    """
    walk = compile_walk(schema, MARKER)
    for node in walk.marked:
        assert node.marker is not None
        if node.marker.get("type") not in _KINDS:
            raise ConfigurationError(f"unknown {MARKER} type {node.marker.get('type')!r}")
        if node.marker.get("type") == "url":
            _checker_for(node.marker)  # a listed host that names no host is refused here
    return SemanticChecks(walk)
