"""What a tool returns and what one send of it came back with.

``ToolResult`` is what a tool may return beyond a plain value (effects, versions, pages);
``Outcome`` (``Succeeded | Failed``) is what one send of a tool came back with, handed from the
executor to the ledger's commit protocol inside one process. A tool's result is taken as it comes:
:meth:`ToolResult.checked` reads facts of other types as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast, get_args

from actionspace.errors import ActionError, said
from actionspace.types import Effect, EffectKind

__all__ = ["Failed", "Outcome", "Succeeded", "ToolResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """A tool's result with the facts the observation needs beyond the data.

    A tool may return a plain value (it becomes ``data``) or this, to report effects and versions::

        return ToolResult(data={"id": eid}, effects=[Effect(resource_id=f"event:{eid}", kind="created")])
    """

    data: Any = None
    effects: tuple[Effect, ...] = ()
    resource_version: str | None = None
    """Version of the resource the data describes (for later ``ResourceRef`` checks)."""
    remote_id: str | None = None
    """The service's own id of the transaction, kept in diagnostics and (later) the ledger."""
    complete: bool = True
    """False when the tool itself returned a page or a partial answer."""
    cursor: str | None = None
    """Where the next page starts (opaque to the model); None on the last page."""
    total: int | None = None
    """How many items the whole listing holds, when the tool knows it."""
    sort_key: str | None = None
    """The order pages follow (``"id"``, ``"-created_at"``); kept in ``diagnostics["sort_key"]``."""
    after: str | None = None
    """The cursor this page was asked for (None: the first page); kept in ``diagnostics["after"]``."""

    def checked(self) -> ToolResult:
        """This result with each field of its declared type. A tool's result is taken as it comes
        (a write's effect has happened by then): a version, id, cursor or sort key of another type
        is kept as its text (``resource_version=5`` as ``"5"``), a ``total`` that is not a count
        (an int from 0 below 2**63) is dropped, and ``effects`` keeps each :class:`Effect` (or
        mapping read as one) with its fields as text and a kind that is none of the four read as
        ``updated``. Nothing here raises."""
        texts = (self.resource_version, self.remote_id, self.cursor, self.sort_key, self.after)
        total = self.total
        if (
            all(t is None or type(t) is str for t in texts)
            and (total is None or _count(total))
            and type(self.complete) is bool
            and type(self.effects) is tuple
            and all(type(e) is Effect and e.well_typed() and e.kind in _KINDS for e in self.effects)
        ):
            return self
        version, remote, cursor, sort_key, after = (_text(t) for t in texts)
        return ToolResult(
            data=self.data,
            effects=_effects(self.effects),
            resource_version=version,
            remote_id=remote,
            complete=self.complete is True,
            cursor=cursor,
            total=total if _count(total) else None,
            sort_key=sort_key,
            after=after,
        )


_COUNT_LIMIT = 2**63
"""A total at or past this is no count a store holds (nor, past 4300 digits, one Python prints)."""


def _count(value: object) -> bool:
    """True when ``value`` is a count: an int (no bool) from 0 below :data:`_COUNT_LIMIT`."""
    return type(value) is int and 0 <= value < _COUNT_LIMIT


def _text(value: object) -> str | None:
    """``value`` as text (:func:`~actionspace.errors.said`); None stays None."""
    return None if value is None else said(value)


_EFFECT_FIELDS = ("resource_id", "kind", "version_before", "version_after")
_KINDS: frozenset[str] = frozenset(get_args(EffectKind))
"""The kinds an effect may have; any other (or none) reads as ``updated``."""


def _effects(given: object) -> tuple[Effect, ...]:
    try:
        items = list(given)  # type: ignore[call-overload]
    except Exception:
        return ()
    out = []
    fields: tuple[Any, ...] | None
    for item in items:
        try:
            if isinstance(item, Mapping):
                fields = tuple(item.get(name) for name in _EFFECT_FIELDS)
            elif isinstance(item, Effect):
                fields = (item.resource_id, item.kind, item.version_before, item.version_after)
            else:
                fields = None
        except Exception:  # a mapping whose reads raise is no effect
            fields = None
        if fields is not None:
            resource, kind, before, after = (_text(f) for f in fields)
            out.append(
                Effect(
                    resource_id=resource or "",
                    kind=cast(EffectKind, kind if kind in _KINDS else "updated"),
                    version_before=before,
                    version_after=after,
                )
            )
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Succeeded:
    """One send of a tool returned ``value`` (a plain value or a :class:`ToolResult`)."""

    value: Any
    attempts: int
    """Attempts spent, retries included (at least 1)."""


@dataclass(frozen=True, slots=True)
class Failed:
    """One send of a tool failed with ``error``, after ``attempts`` attempts."""

    error: ActionError
    attempts: int
    running: Any = None
    """For a timeout whose attempt still runs on its worker thread: a
    ``concurrent.futures.Future`` of the Outcome that attempt ends with. While it runs, nothing
    may ask the tool's status or send again for the same action."""


Outcome = Succeeded | Failed
"""What the executor hands the ledger's commit protocol for one send."""
