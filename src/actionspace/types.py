"""Values that cross module boundaries: calls, observations, effects, provenance.

The records (``ToolCall``, ``Observation``, ``Effect``, ``Provenance``, ``Trimming``) are frozen,
keyword-only dataclasses with ``to_dict`` / ``from_dict`` so they round-trip through JSON (trace,
ledger, HTTP, MCP) unchanged. What a tool returns and what one send came back with live in
:mod:`actionspace.outcomes`. ``Clock`` is where expiry and deadlines read
the time (``SYSTEM_CLOCK`` by default; tests drive a ``ManualClock`` instead of sleeping).
"""

from __future__ import annotations

import reprlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, Protocol, cast, runtime_checkable

from actionspace._canonical import clip_end, unshowable
from actionspace._fast import fast_init
from actionspace.errors import ActionError

__all__ = [
    "SYSTEM_CLOCK",
    "ArgSource",
    "Clock",
    "Effect",
    "EffectKind",
    "ManualClock",
    "Observation",
    "ObservationStatus",
    "Provenance",
    "SystemClock",
    "ToolCall",
    "Trimming",
    "find_refs",
    "template_parts",
]

ObservationStatus = Literal["ok", "partial", "error"]


@runtime_checkable
class Clock(Protocol):
    """Where expiry (approvals, ledger retention) and deadlines read the time."""

    def time(self) -> float:
        """Wall-clock Unix seconds: what is stored (``expires_at``, ``created_at``)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes back: what deadlines are measured in."""
        ...


class SystemClock:
    """The real clock: ``time.time`` and ``time.monotonic``."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()
"""The clock everything uses unless given another."""


class ManualClock:
    """A clock that moves only when told to (:meth:`advance`): tests drive expiry with it.

    Both readings start at ``start`` (Unix seconds, default the real time now) and move together.
    Thread-safe.
    """

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else float(start)
        self._origin = self._now
        self._lock = threading.Lock()

    def time(self) -> float:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._now - self._origin

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds`` (never back: a negative value raises ValueError)."""
        if seconds < 0:
            raise ValueError("a clock never goes back")
        with self._lock:
            self._now += seconds

    def __repr__(self) -> str:
        return f"ManualClock({self._now!r})"


EffectKind = Literal["created", "updated", "deleted", "sent"]


class _EmptyMapping(Mapping[str, Any]):
    """An immutable, hashable empty mapping: a safe class-level default."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


_EMPTY: Mapping[str, Any] = _EmptyMapping()

ArgSource = str
"""Where an argument value came from: ``user``, ``tool_result:<call_id>``, ``model_inferred``,
``default``."""


def template_parts(text: str) -> list[tuple[str, bool]]:
    """Split a ``$template`` string into (text, is_reference) parts.

    ``"My GPA is {var1.data.gpa}"`` → ``[("My GPA is ", False), ("var1.data.gpa", True)]``;
    ``{{`` and ``}}`` stand for literal braces. Raises ValueError on an unbalanced brace.
    """
    parts: list[tuple[str, bool]] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "{}" and text[i : i + 2] in ("{{", "}}"):
            literal.append(ch)
            i += 2
            continue
        if ch == "}":
            raise ValueError(f"unbalanced '}}' at position {i} of the template")
        if ch == "{":
            end = text.find("}", i + 1)
            if end < 0 or "{" in text[i + 1 : end]:
                raise ValueError(f"unbalanced '{{' at position {i} of the template")
            if literal:
                parts.append(("".join(literal), False))
                literal = []
            parts.append((text[i + 1 : end].strip(), True))
            i = end + 1
            continue
        literal.append(ch)
        i += 1
    if literal:
        parts.append(("".join(literal), False))
    return parts


def _is_template(value: Mapping[str, Any]) -> bool:
    return "$template" in value and len(value) == 1


def find_refs(value: Any, at: str = "") -> Iterator[tuple[str, Any]]:
    """Yield (JSON pointer, raw ``$ref`` value) for every reference inside an argument ``value``.

    A reference is an object whose only key is ``"$ref"`` (a plan node's argument bound to another
    node's observation, see :mod:`actionspace.plan.refs`); the pointer is relative to ``value``.
    A template ``{"$template": "My GPA is {n1.data.gpa}"}`` yields each of its references at the
    template's pointer (an unreadable template yields its text, which no reference parser accepts).
    """
    if isinstance(value, Mapping):
        if "$ref" in value and len(value) == 1:
            yield at or "/", value["$ref"]
            return
        if _is_template(value):
            text = value["$template"]
            try:
                parts = template_parts(text) if isinstance(text, str) else [(repr(text), True)]
            except ValueError as exc:
                parts = [(f"$template: {exc}", True)]
            for part, is_ref in parts:
                if is_ref:
                    yield at or "/", part
            return
        for k, v in value.items():
            if isinstance(v, (Mapping, list)):
                yield from find_refs(v, f"{at}/{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, (Mapping, list)):
                yield from find_refs(v, f"{at}/{i}")


@fast_init
@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """One proposed call, as the model emitted it (after parsing, before any check)."""

    name: str
    """Tool name as emitted; may be ``name@version``."""
    arguments: Any
    """Usually a dict; anything else is rejected at validation, never coerced silently."""
    id: str | None = None
    """The provider's call id, when the format carries one."""
    provenance: Mapping[str, ArgSource] = _EMPTY
    """Per top-level argument, where its value came from; missing entries are ``model_inferred``."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "id": self.id,
            "provenance": dict(self.provenance),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        return cls(
            name=str(data["name"]),
            arguments=data.get("arguments", {}),
            id=data.get("id"),
            provenance=dict(data.get("provenance") or {}),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Effect:
    """A change a committed call made to a resource."""

    resource_id: str
    kind: EffectKind
    version_before: str | None = None
    version_after: str | None = None

    def well_typed(self) -> bool:
        """True when every field holds text (or None where it may)."""
        return (
            type(self.resource_id) is str
            and type(self.kind) is str
            and (self.version_before is None or type(self.version_before) is str)
            and (self.version_after is None or type(self.version_after) is str)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "resource_id": self.resource_id,
            "kind": self.kind,
            "version_before": self.version_before,
            "version_after": self.version_after,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Effect:
        return cls(
            resource_id=str(data["resource_id"]),
            kind=cast(EffectKind, data["kind"]),
            version_before=data.get("version_before"),
            version_after=data.get("version_after"),
        )


@fast_init
@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where an observation's data came from and how far it can be trusted."""

    source: str = "tool"
    """``tool`` (fresh), ``cache``, ``artifact`` or ``runtime`` (an error made by the runtime)."""
    fetched_at: float | None = None
    """Unix time in seconds when the data was produced."""
    resource_version: str | None = None
    trust: Literal["trusted", "untrusted"] = "trusted"
    labels: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "fetched_at": self.fetched_at,
            "resource_version": self.resource_version,
            "trust": self.trust,
            "labels": list(self.labels),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Provenance:
        return cls(
            source=str(data.get("source", "tool")),
            fetched_at=data.get("fetched_at"),
            resource_version=data.get("resource_version"),
            trust=cast(Literal["trusted", "untrusted"], data.get("trust", "trusted")),
            labels=tuple(data.get("labels", ())),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Trimming:
    """Which deterministic rule shaped ``data`` and how much it kept."""

    rule: str
    rule_version: str
    original_bytes: int
    kept_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "rule_version": self.rule_version,
            "original_bytes": self.original_bytes,
            "kept_bytes": self.kept_bytes,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trimming:
        return cls(
            rule=str(data["rule"]),
            rule_version=str(data["rule_version"]),
            original_bytes=int(data["original_bytes"]),
            kept_bytes=int(data["kept_bytes"]),
        )


_EMPTY_PROVENANCE = Provenance()


@fast_init
@dataclass(frozen=True, kw_only=True)
class Observation:
    """What the model sees after a proposal: a bounded result or a typed error (DESIGN §5).

    Immutable; built by :func:`actionspace._fast.fast_init` (every default is an immutable value).
    """

    call_id: str
    tool: str
    tool_version: str | None = None
    status: ObservationStatus = "ok"
    data: Any = None
    effects: tuple[Effect, ...] = ()
    error: ActionError | None = None
    diagnostics: Mapping[str, Any] = _EMPTY
    artifact_ref: str | None = None
    """``artifact://sha256/<hex>`` of the full raw output, when it was kept."""
    complete: bool = True
    """False whenever anything was cut, paged or served stale."""
    cursor: str | None = None
    total: int | None = None
    content_hash: str | None = None
    """sha256 hex of the canonical JSON of ``data``."""
    provenance: Provenance = _EMPTY_PROVENANCE
    trimming: Trimming | None = None
    provisional: bool = False
    items: tuple[Observation, ...] = ()

    def __repr__(self) -> str:
        """Bounded, never raising whatever ``data`` holds; its values read ``[redacted]`` while its labels
        or its run's (:data:`SHOWN_UNDER`) are secret or name readers, as trace views show them uncleared."""
        return _observation_repr(self, 0)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def grouped(self) -> bool:
        """True for the observation of a multi-call message, which stands for its ``items``
        (one per proposed call). A failed call of a tool the model named ``"*"`` is not one."""
        return self.tool == "*" and bool(self.items)

    def to_dict(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool": self.tool,
            "tool_version": self.tool_version,
            "status": self.status,
            "data": self.data,
            "effects": [e.to_dict() for e in self.effects],
            "error": self.error.to_dict() if self.error is not None else None,
            "diagnostics": dict(self.diagnostics),
            "artifact_ref": self.artifact_ref,
            "complete": self.complete,
            "cursor": self.cursor,
            "total": self.total,
            "content_hash": self.content_hash,
            "provenance": self.provenance.to_dict(),
            "trimming": self.trimming.to_dict() if self.trimming is not None else None,
            "provisional": self.provisional,
            "items": [i.to_dict() for i in self.items],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Observation:
        error = data.get("error")
        trimming = data.get("trimming")
        return cls(
            call_id=str(data["call_id"]),
            tool=str(data["tool"]),
            tool_version=data.get("tool_version"),
            status=cast(ObservationStatus, data.get("status", "ok")),
            data=data.get("data"),
            effects=tuple(Effect.from_dict(e) for e in data.get("effects", ())),
            error=ActionError.from_dict(error) if error else None,
            diagnostics=dict(data.get("diagnostics") or {}),
            artifact_ref=data.get("artifact_ref"),
            complete=bool(data.get("complete", True)),
            cursor=data.get("cursor"),
            total=data.get("total"),
            content_hash=data.get("content_hash"),
            provenance=Provenance.from_dict(data.get("provenance") or {}),
            trimming=Trimming.from_dict(trimming) if trimming else None,
            provisional=bool(data.get("provisional", False)),
            items=tuple(Observation.from_dict(i) for i in data.get("items", ())),
        )

    @classmethod
    def failure(
        cls, error: ActionError, *, call_id: str, tool: str, tool_version: str | None = None
    ) -> Observation:
        """An error observation made by the runtime (nothing ran, or the outcome is known bad)."""
        return cls(
            call_id=call_id,
            tool=tool,
            tool_version=tool_version,
            status="error",
            error=error,
            provenance=_RUNTIME_PROVENANCE,
        )


_RUNTIME_PROVENANCE = Provenance(source="runtime")


class _SafeRepr(reprlib.Repr):
    """``reprlib``'s bounded repr, where a part whose ``repr`` raises becomes a placeholder."""

    def repr1(self, x: Any, level: int) -> str:
        try:
            return str(super().repr1(x, level))
        except Exception as exc:
            return unshowable(x, exc)


_SHOWN = _SafeRepr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlong = 3, 80, 80, 40
_SHOWN.maxdict = _SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxset = _SHOWN.maxfrozenset = 8
_REDACTED: Final = "[redacted]"
"""What a restricted value reads as (``actionspace.policy.redaction.REDACTED``)."""
_NAMING: Final = {"call_id", "tool", "tool_version", "status", "complete", "content_hash", "provenance"}
"""Fields that name things (the trace views keep their counterparts) or hold no value of the data."""
SHOWN_UNDER: Final = "_shown_under"
"""An observation's attribute (no field): the tags of the run label it was shown under, when that label
restricts readers. None on one no run showed (built by hand, read ``from_dict``, made by ``replace``)."""


def _observation_repr(obs: Observation, depth: int) -> str:
    try:  # restricted: its labels or its run's are secret or name readers (or are no tags at all)
        tags = (*obs.provenance.labels, *obs.__dict__.get(SHOWN_UNDER, ()))
        hidden = any(type(tag) is not str or tag == "secret" or tag.startswith("reader") for tag in tags)
    except Exception:
        hidden = True
    parts: list[str] = []
    for name, default in _DEFAULTS.items():
        value = getattr(obs, name, None)
        try:
            if name == "items":
                text = _items_repr(value, depth)
            elif name == "error" and value is not None:
                message = _SHOWN.repr(_REDACTED if hidden else value.message)
                text = f"ActionError(category={_SHOWN.repr(value.category)}, message={message})"
            elif hidden and name not in _NAMING and value is not default:
                text = repr(_REDACTED)
            elif type(value) is Provenance or type(value) is Trimming:  # their own fields are plain
                if hidden and type(value) is Provenance and value.resource_version is not None:
                    value = replace(value, resource_version=_REDACTED)
                text = clip_end(repr(value), 400)
            else:
                text = clip_end(_SHOWN.repr(value), 400)
        except Exception as exc:
            text = unshowable(value, exc)
        parts.append(f"{name}={text}")
    return clip_end(f"Observation({', '.join(parts)})", 2000 >> (2 * depth))


def _items_repr(items: Any, depth: int) -> str:
    if not items or depth >= 1:
        return f"<{len(items)} observations>" if items else "()"
    shown = [_observation_repr(i, 1) if isinstance(i, Observation) else _SHOWN.repr(i) for i in items[:3]]
    return f"({', '.join(shown + ([f'…[+{len(items) - 3} more]'] if len(items) > 3 else []))})"


_DEFAULTS: Final = {name: field.default for name, field in Observation.__dataclass_fields__.items()}
