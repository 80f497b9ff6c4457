"""Completion verifiers: checks of a conclusion against the observations it was drawn from.

A verifier is called as ``verifier(observed, claim=None)`` where ``observed`` is one
:class:`Observation` or a sequence of them, and answers :class:`Accepted` or :class:`Rejected`.
Called with one observation it is a plan node's ``verify``. Verifiers compose: ``a & b`` accepts
when both accept (the first rejection is the answer), ``a | b`` when either does.

A rejected conclusion is an ``ActionError`` of category ``permanent`` (the conclusion cannot
stand as drawn) with ``details["reason"]`` saying why; ``recovery`` names the way forward, such as
``fetch_next_page`` for an ``incomplete_listing`` (``details["cursor"]`` is where to continue).

* :func:`no_other_items`: "these are all the items" holds only when every observation it relies
  on is final, ok, uncut, fresh, and the pages form one walk from the first page to the last.
* :func:`fields_equal`: fields of the observation (dotted paths such as ``data.items[0].id``)
  have the expected values.
* :func:`predicate`: any test of an observation.
* :func:`final` and :func:`fresh`: not provisional; not older than a bound.
"""

from __future__ import annotations

import json
import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from actionspace.catalog.spec import Completion
from actionspace.errors import ActionError
from actionspace.observation.pagination import page_info, page_items
from actionspace.types import Observation
from actionspace.validation.verdicts import ACCEPTED, Accepted, Rejected

__all__ = [
    "AllOf",
    "AnyOf",
    "Completion",
    "Observed",
    "PostInput",
    "Verifier",
    "fields_equal",
    "final",
    "fresh",
    "lookup",
    "no_other_items",
    "predicate",
    "reject",
]

Observed = Observation | Sequence[Observation]
"""What a verifier checks: one observation or the several a conclusion relies on."""
Verdict = Accepted | Rejected

_MISSING: Final = object()
_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_SHOWN: Final = 20


def reject(reason: str, message: str, *, recovery: Sequence[str] | None = None, **details: Any) -> Rejected:
    """A ``permanent`` rejection with ``details["reason"] = reason`` (and the other details)."""
    fields: dict[str, Any] = {"details": {"reason": reason, **details}}
    if recovery is not None:
        fields["recovery"] = tuple(recovery)
    return Rejected(ActionError.of("permanent", message, **fields))


@dataclass(frozen=True, kw_only=True)
class PostInput:
    """What a post-condition sees of a call that just ran (frozen: a new field breaks no verifier)."""

    observation: Observation
    """The call's observation (status ok: post-conditions run only after a successful answer)."""
    arguments: Mapping[str, Any]
    """The validated arguments the tool received (JSON values)."""
    tool: str
    """``name@version``."""


def _as_list(observed: Observed) -> list[Observation]:
    return [observed] if isinstance(observed, Observation) else list(observed)


class Verifier(ABC):
    """A check of a conclusion; subclasses implement :meth:`check`.

    As a tool's post-condition (``@rt.tool(verify=[...])``) it is called through :meth:`after`,
    which sees the call's arguments too; ``proves`` is the completion level an acceptance
    establishes (``accepted``: the tool's own answer; ``delivered``: the effect read back).
    """

    name: str = "verifier"
    """Named in a rejection and in the ``verified`` trace event."""
    proves: Completion = "accepted"

    def after(self, inp: PostInput) -> Verdict:
        """Check the observation of a call that just ran (default: :meth:`check` of it alone)."""
        return self.check(inp.observation)

    @abstractmethod
    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        """Accepted, or Rejected with the reason the conclusion cannot be drawn."""

    def __call__(self, observed: Observed, claim: Any = None) -> Verdict:
        return self.check(observed, claim)

    def __and__(self, other: Verifier) -> Verifier:
        return AllOf((self, other))

    def __or__(self, other: Verifier) -> Verifier:
        return AnyOf((self, other))


class AllOf(Verifier):
    """Accepts when every part accepts; otherwise the first rejection."""

    name = "all_of"

    def __init__(self, parts: Sequence[Verifier]) -> None:
        flat: list[Verifier] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, AllOf) else (part,))
        self.parts: tuple[Verifier, ...] = tuple(flat)

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        for part in self.parts:
            verdict = part.check(observed, claim)
            if isinstance(verdict, Rejected):
                return verdict
        return ACCEPTED


class AnyOf(Verifier):
    """Accepts when some part accepts; otherwise the last rejection."""

    name = "any_of"

    def __init__(self, parts: Sequence[Verifier]) -> None:
        flat: list[Verifier] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, AnyOf) else (part,))
        self.parts: tuple[Verifier, ...] = tuple(flat)

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        verdict: Verdict = reject("no_verifier", "no verifier to accept the conclusion")
        for part in self.parts:
            verdict = part.check(observed, claim)
            if isinstance(verdict, Accepted):
                return verdict
        return verdict


class _Fresh(Verifier):
    name = "fresh"

    def __init__(self, max_age_s: float) -> None:
        if not max_age_s > 0:
            raise ValueError("max_age_s must be > 0")
        self.max_age_s = max_age_s

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        now = time.time()
        for obs in _as_list(observed):
            fetched = obs.provenance.fetched_at
            if fetched is None and obs.provenance.source != "cache":
                continue
            age = math.inf if fetched is None else now - fetched
            if age > self.max_age_s:
                return reject(
                    "stale_observation",
                    f"{obs.tool} was observed {age:.0f}s ago (source {obs.provenance.source}); "
                    f"the bound is {self.max_age_s:g}s",
                    recovery=("observe_again",),
                    call_id=obs.call_id,
                    source=obs.provenance.source,
                    age_s=None if math.isinf(age) else round(age, 3),
                )
        return ACCEPTED


def fresh(max_age_s: float) -> Verifier:
    """Rejects an observation older than ``max_age_s`` seconds (a cached one of unknown age too)."""
    return _Fresh(max_age_s)


class _Final(Verifier):
    name = "final"

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        for obs in _as_list(observed):
            if obs.provisional:
                return reject(
                    "provisional",
                    f"{obs.tool} was still streaming; only its final observation may support a conclusion",
                    recovery=("wait_for_final",),
                    call_id=obs.call_id,
                )
        return ACCEPTED


def final() -> Verifier:
    """Rejects a provisional (still streaming) observation."""
    return _Final()


class _NoOtherItems(Verifier):
    name = "no_other_items"

    def __init__(self, max_age_s: float | None, id_field: str | None) -> None:
        self.freshness = _Fresh(max_age_s) if max_age_s is not None else None
        self.id_field = id_field

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        pages = _as_list(observed)
        if not pages:
            return reject("no_observation", "no observation supports the claim that there are no other items")
        for obs in pages:
            verdict = _usable(obs)
            if isinstance(verdict, Rejected):
                return verdict
        if self.freshness is not None:
            verdict = self.freshness.check(pages)
            if isinstance(verdict, Rejected):
                return verdict
        verdict = _one_walk(pages)
        if isinstance(verdict, Rejected):
            return verdict
        items: list[Any] = []
        for obs in pages:
            found = page_items(obs)
            if found is None:
                return ACCEPTED if claim is None else _unreadable(obs)
            items.extend(found)
        totals = [obs.total for obs in pages if obs.total is not None]
        if len(set(totals)) > 1:
            return reject(
                "listing_changed",
                f"the listing's total changed while it was read ({totals[0]} → {totals[-1]}); "
                "items may have been skipped or read twice",
                recovery=("observe_again",),
                totals=totals[:_SHOWN],
            )
        repeated = self._duplicates(items)
        if repeated:
            return reject(
                "duplicate_items",
                f"the walk read {len(repeated)} item(s) twice ({repeated[:3]!r}); the listing shifted "
                "between pages, so items may also be missing",
                recovery=("observe_again",),
                duplicates=repeated[:_SHOWN],
                seen=len(items),
            )
        total = pages[-1].total
        if total is not None and total != len(items):
            return reject(
                "count_mismatch",
                f"the pages hold {len(items)} items but the listing reports {total}; it changed while "
                "it was read",
                recovery=("observe_again",),
                seen=len(items),
                total=total,
            )
        return self._claim(items, claim)

    def _claim(self, items: list[Any], claim: Any) -> Verdict:
        if claim is None:
            return ACCEPTED
        if isinstance(claim, int) and not isinstance(claim, bool):
            if claim == len(items):
                return ACCEPTED
            return reject(
                "claim_mismatch",
                f"the claim counts {claim} items; the listing has {len(items)}",
                seen=len(items),
            )
        seen = [self._id(item) for item in items]
        claimed = [self._id(item) for item in claim]
        missing = [i for i in seen if i not in claimed]
        extra = [i for i in claimed if i not in seen]
        if not missing and not extra:
            return ACCEPTED
        return reject(
            "claim_mismatch",
            f"the claim leaves out {len(missing)} listed items and names {len(extra)} that are not listed",
            missing=missing[:_SHOWN],
            extra=extra[:_SHOWN],
        )

    def _id(self, item: Any) -> Any:
        if self.id_field is not None and isinstance(item, Mapping):
            return item.get(self.id_field)
        return item

    def _duplicates(self, items: list[Any]) -> list[Any]:
        """Ids (by ``id_field``; whole records without one) read more than once, in walk order."""
        if self.id_field is None and not all(isinstance(item, Mapping) for item in items):
            return []  # plain values may repeat legitimately; records without ids are compared whole
        seen: set[str] = set()
        repeated: list[Any] = []
        for item in items:
            ident = self._id(item) if self.id_field is not None else item
            token = json.dumps(ident, sort_keys=True, default=str)
            if token in seen:
                repeated.append(ident)
            seen.add(token)
        return repeated


def _usable(obs: Observation) -> Verdict:
    if obs.status != "ok":
        category = obs.error.category if obs.error is not None else None
        return reject(
            "failed_observation",
            f"{obs.tool} did not succeed ({category}); it cannot show there are no other items",
            call_id=obs.call_id,
            category=category,
        )
    if obs.provisional:
        return _Final().check(obs)
    if obs.trimming is not None and not obs.complete:
        return reject(
            "trimmed",
            f"{obs.tool}'s output was cut to fit; the full output is {obs.artifact_ref}",
            recovery=("read_artifact", "aggregate"),
            call_id=obs.call_id,
            artifact_ref=obs.artifact_ref,
        )
    if not obs.complete and obs.cursor is None:
        return reject(
            "incomplete_listing",
            f"{obs.tool} says its result is incomplete",
            recovery=("observe_again", "take_another_path"),
            call_id=obs.call_id,
            cursor=None,
        )
    return ACCEPTED


def _one_walk(pages: list[Observation]) -> Verdict:
    """The pages start at the first page and each cursor is followed by the page it leads to."""
    first = page_info(pages[0])
    if first.after is not None:
        return reject(
            "incomplete_listing",
            "the pages do not start at the first page of the listing",
            recovery=("fetch_first_page",),
            cursor=None,
            after=first.after,
        )
    for i, obs in enumerate(pages):
        cursor = obs.cursor
        if cursor is None:
            continue
        following = page_info(pages[i + 1]) if i + 1 < len(pages) else None
        if following is None or following.after != cursor:
            return reject(
                "incomplete_listing",
                f"{obs.tool} has more items after this page; no page read from cursor {cursor!r} follows it",
                recovery=("fetch_next_page", "aggregate"),
                call_id=obs.call_id,
                cursor=cursor,
                total=obs.total,
            )
    return ACCEPTED


def _unreadable(obs: Observation) -> Verdict:
    return reject(
        "items_unreadable",
        f"{obs.tool}'s items cannot be read to compare with the claim",
        call_id=obs.call_id,
    )


def no_other_items(*, max_age_s: float | None = None, id_field: str | None = None) -> Verifier:
    """Accepts "there are no other items" only from a complete, final, fresh, unbroken listing.

    Rejects when an observation failed, is provisional, was cut, says ``complete=False`` for a
    reason other than paging, is older than ``max_age_s`` seconds (when given; a cached one of
    unknown age is rejected too), when the pages do not start at the first page, or when a page's
    cursor is not followed by the page it leads to (``incomplete_listing``, ``details["cursor"]``
    = where to continue). A known ``total`` must equal the items read. A ``claim`` (a count, or
    the items / ids the conclusion names, compared by ``id_field``) must match the listing.
    An item read twice (by ``id_field``, or a whole record when there is none) is rejected as
    ``duplicate_items``: a listing that shifted under the walk repeats one item and skips another,
    so equal counts prove nothing; pages reporting different totals are rejected as
    ``listing_changed`` (an item deleted or added behind the cursor shifts the pages: a gap).
    """
    return _NoOtherItems(max_age_s, id_field)


def lookup(obs: Observation, path: str) -> Any:
    """The value at a dotted path (``data.items[0].id``, ``provenance.resource_version``).

    Raises ``KeyError`` when the path leads nowhere.
    """
    value: Any = obs.to_dict()
    for name, index in _STEP.findall(path):
        if index:
            if not isinstance(value, list) or int(index) >= len(value):
                raise KeyError(path)
            value = value[int(index)]
        elif isinstance(value, Mapping) and name in value:
            value = value[name]
        else:
            raise KeyError(path)
    return value


class _FieldsEqual(Verifier):
    name = "fields_equal"

    def __init__(self, expected: Mapping[str, Any]) -> None:
        if not expected:
            raise ValueError("fields_equal needs at least one field")
        self.expected = dict(expected)

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        for obs in _as_list(observed):
            for path, want in self.expected.items():
                try:
                    got = lookup(obs, path)
                except KeyError:
                    got = _MISSING
                if got is _MISSING or got != want:
                    shown = "<missing>" if got is _MISSING else got
                    return reject(
                        "field_mismatch",
                        f"{obs.tool}: {path} is {shown!r}, expected {want!r}",
                        call_id=obs.call_id,
                        path=path,
                        expected=want,
                        actual=None if got is _MISSING else got,
                    )
        return ACCEPTED


def fields_equal(expected: Mapping[str, Any] | None = None, /, **data_fields: Any) -> Verifier:
    """Accepts when every path has its expected value, e.g. ``fields_equal({"data.status": "ok"})``.

    Keyword arguments name fields of ``data``: ``fields_equal(status="confirmed")`` checks
    ``data.status``. Given several observations, each must match.
    """
    paths = dict(expected or {})
    paths.update({f"data.{name}": value for name, value in data_fields.items()})
    return _FieldsEqual(paths)


class _Predicate(Verifier):
    name = "predicate"

    def __init__(self, test: Callable[[Observation], bool], reason: str, message: str) -> None:
        self.test, self.reason, self.message = test, reason, message

    def check(self, observed: Observed, claim: Any = None) -> Verdict:
        for obs in _as_list(observed):
            if not self.test(obs):
                return reject(self.reason, f"{obs.tool}: {self.message}", call_id=obs.call_id)
        return ACCEPTED


def predicate(
    test: Callable[[Observation], bool],
    *,
    reason: str = "predicate_failed",
    message: str = "the check failed",
) -> Verifier:
    """Accepts when ``test(observation)`` is true for every observation checked."""
    return _Predicate(test, reason, message)
