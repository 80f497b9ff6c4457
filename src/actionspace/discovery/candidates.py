"""Candidate sets: which tools one offer shows the model, and why every other tool was left out.

The host builds the offered set from five facts, applied in this order (the first that fails names
the reason a tool was left out):

1. ``retired``: a retired version is never offered to a new run;
2. ``not_requested``: the host named the tools it wants and this one is not among them;
3. ``phase``: the tool declares the task phases it belongs to and the current phase is not one;
4. ``capability``: the tool needs an environment capability (a service, a resource kind) that
   this environment does not have;
5. ``error_state``: a recovery tool (``Availability(recovers=("conflict",))``) is offered only
   once one of the errors it recovers from has occurred in the run;

then the eligible tools are ranked (lexically with BM25, optionally blended with embeddings, see
:mod:`actionspace.discovery.ranking`) and, after ranking,

6. ``permission``: the principal lacks a scope the tool requires — this filter always runs after
   ranking, so a top-ranked tool the principal may not use is never offered;
7. ``rank_cut``: more permitted tools than ``limit``; the lowest-ranked are cut. Recovery tools
   whose error occurred are never cut (the moment they are needed is the moment they must show).

An index holds one catalog snapshot as arrays, so a selection over 10,000 tools is a handful of
vector operations plus one permission check per distinct scope set (cached per principal).
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt

from actionspace.catalog.spec import ToolSpec
from actionspace.discovery._scopes import ScopeTable
from actionspace.discovery.ranking import Embedder, Ranker
from actionspace.errors import ConfigurationError
from actionspace.policy.principal import Principal
from actionspace.trace.offers import CODES, LISTED_MAX, OFFERED_CODE, catalog_digest, pack_codes

__all__ = [
    "REASONS",
    "Availability",
    "CandidateIndex",
    "LeftOutReason",
    "Request",
    "Selection",
    "request_of",
    "safe_suggestions",
]

LeftOutReason = Literal[
    "retired", "not_requested", "phase", "capability", "error_state", "permission", "rank_cut"
]
REASONS: Final[tuple[LeftOutReason, ...]] = (
    "retired",
    "not_requested",
    "phase",
    "capability",
    "error_state",
    "permission",
    "rank_cut",
)
"""Every reason a tool can be left out, in the order the filters apply."""

_OFFERED: Final = -1
_LETTERS: Final = np.frombuffer(("".join(CODES[r] for r in REASONS) + OFFERED_CODE).encode(), dtype=np.uint8)
"""Reason code → its letter in ``left_out_codes`` (``_OFFERED``, -1, indexes the last: offered)."""
_CODE: Final = {reason: i for i, reason in enumerate(REASONS)}
_PERMISSION_CACHE: Final = 64
"""Permission masks kept per index, one per distinct principal scope set (least recently used goes)."""

_NAMES_CACHE: Final = 16
"""Masks of requested names kept per index, one per distinct set (least recently used goes)."""

Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class Availability:
    """When a tool may be offered, beyond its lifecycle and the principal's scopes.

    Every field defaults to "no constraint".
    """

    phases: tuple[str, ...] = ()
    """Task phases the tool belongs to (e.g. ``("plan", "execute")``); empty = every phase."""
    requires: tuple[str, ...] = ()
    """Environment capabilities the tool needs, all of them (e.g. ``("calendar",)``); empty = none."""
    recovers: tuple[str, ...] = ()
    """Error categories this tool recovers from; non-empty makes it a recovery tool, offered only
    after one of these errors occurred in the run."""

    def __post_init__(self) -> None:
        for name in ("phases", "requires", "recovers"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ConfigurationError(f"Availability.{name} must be a tuple of strings, not {value!r}")
            object.__setattr__(self, name, tuple(value))


ALWAYS: Final = Availability()


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What one offer asks for. Every field defaults to "no filter"."""

    principal: Principal
    """Whose scopes decide the ``permission`` filter. Required."""
    query: str | None = None
    """The task text the tools are ranked against; None = no ranking (registration order)."""
    limit: int | None = None
    """Most tools offered (recovery tools whose error occurred come on top); None = no cut."""
    phase: str | None = None
    """The task's current phase; None = tools of every phase are eligible."""
    capabilities: frozenset[str] | None = None
    """What this environment has; None = every capability is assumed present."""
    errors: frozenset[str] = frozenset()
    """Error categories already seen in the run (they unlock recovery tools)."""
    names: frozenset[str] | None = None
    """Only these tool names; None = every tool."""

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 0:
            raise ConfigurationError(f"limit must be >= 0, got {self.limit}")


class Selection:
    """The outcome of one selection: the offered tools (best first) and why the others were left out.

    The reasons are kept as one code per tool and turned into names only when asked for
    (:attr:`left_out`, :meth:`event`): a selection over 10,000 tools stays a few vector operations.
    """

    __slots__ = ("_catalog", "_keys", "_left", "_reason", "_retired", "offered", "scores")

    def __init__(
        self,
        offered: tuple[ToolSpec, ...],
        scores: tuple[float, ...] | None,
        keys: npt.NDArray[Any],
        reason: npt.NDArray[np.int8],
        retired: tuple[str, ...],
        catalog: str | None = None,
    ) -> None:
        self.offered = offered
        """Best first (registration order without a query); under a ``limit``, unlocked recovery
        tools lead."""
        self.scores = scores
        """Ranking score of each offered tool (same order), or None when nothing was ranked."""
        self._keys = keys
        self._reason = reason
        self._retired = retired
        self._catalog = catalog
        self._left: tuple[tuple[str, LeftOutReason], ...] | None = None

    @property
    def left_out(self) -> tuple[tuple[str, LeftOutReason], ...]:
        """(``name@version``, reason) for every tool of the full set not offered."""
        if self._left is None:
            out = np.flatnonzero(self._reason != _OFFERED)
            codes = self._reason[out].tolist()
            left = list(zip(self._keys[out].tolist(), (REASONS[c] for c in codes), strict=True))
            left += [(key, "retired") for key in self._retired]
            self._left = tuple(left)
        return self._left

    @property
    def full_set(self) -> tuple[str, ...]:
        """``name@version`` of every tool considered, retired versions included."""
        return (*self._keys.tolist(), *self._retired)

    def reasons(self) -> dict[str, int]:
        """How many tools each reason left out."""
        codes = self._reason[self._reason != _OFFERED]
        counts = np.bincount(codes.astype(np.int64), minlength=len(REASONS)).tolist()
        out: dict[str, int] = {REASONS[c]: n for c, n in enumerate(counts) if n}
        if self._retired:
            out["retired"] = out.get("retired", 0) + len(self._retired)
        return out

    def event(self, recorded: Container[str] = ()) -> dict[str, Any]:
        """The ``candidates_offered`` trace payload: full set, offered set, reason per left-out tool.

        Listed whole for a full set of at most ``LISTED_MAX`` tools; larger ones are packed
        (:mod:`actionspace.trace.offers`), their ``full_set`` left out when ``recorded`` holds the
        catalog's digest (the run's trace already has it).
        """
        offered: list[dict[str, Any]] = [
            {"name": s.name, "version": s.version, "schema_hash": s.schema_hash} for s in self.offered
        ]
        if self.scores is not None:
            for item, score in zip(offered, self.scores, strict=True):
                item["score"] = round(score, 4)
        if self._catalog is None:
            return {
                "offered": offered,
                "left_out": [{"name": key, "reason": reason} for key, reason in self.left_out],
                "full_set": list(self.full_set),
                "reasons": self.reasons(),
            }
        codes = _LETTERS[self._reason].tobytes() + CODES["retired"].encode() * len(self._retired)
        event: dict[str, Any] = {"offered": offered, "catalog": self._catalog}
        if self._catalog not in recorded:
            event["full_set"] = list(self.full_set)
        event["left_out_codes"] = pack_codes(codes)
        event["reasons"] = self.reasons()
        return event

    @property
    def catalog(self) -> str | None:
        """The digest naming the full set when events of this selection are packed, else None."""
        return self._catalog


def _flag(n: int, members: Iterable[int]) -> Mask:
    mask = np.zeros(n, dtype=np.bool_)
    idx = list(members)
    if idx:
        mask[idx] = True
    return mask


class CandidateIndex:
    """One catalog snapshot prepared for fast selection. Immutable after construction; thread-safe.

    ``specs``: the offerable versions (one per name, registration order). ``retired``: keys of
    retired versions (listed as left out, never offered). ``availability``: per tool name.
    ``embedder``: optional, blended into the lexical ranking (see :class:`Ranker`).
    """

    def __init__(
        self,
        specs: Sequence[ToolSpec],
        *,
        retired: Sequence[str] = (),
        availability: Mapping[str, Availability] | None = None,
        embedder: Embedder | None = None,
        embedding_weight: float = 0.5,
    ) -> None:
        self.specs: tuple[ToolSpec, ...] = tuple(specs)
        self.retired = tuple(retired)
        avail = availability or {}
        n = len(self.specs)
        self._keys = np.array([s.key for s in self.specs], dtype=object)
        self._spec_array = np.empty(n, dtype=object)
        self._spec_array[:] = self.specs
        self._position = {s.name: i for i, s in enumerate(self.specs)}
        per_tool = [avail.get(s.name, ALWAYS) for s in self.specs]
        self._phase_free = _flag(n, (i for i, a in enumerate(per_tool) if not a.phases))
        self._phases = self._members(per_tool, "phases")
        self._requires = self._members(per_tool, "requires")
        self._recovery = _flag(n, (i for i, a in enumerate(per_tool) if a.recovers))
        self._recovers = self._members(per_tool, "recovers")
        self._scopes = ScopeTable([tuple(s.scopes or ()) for s in self.specs])
        self._permissions: OrderedDict[tuple[str, ...], Mask] = OrderedDict()
        self._lock = threading.Lock()
        self.ranker = Ranker(self.specs, embedder=embedder, embedding_weight=embedding_weight)
        full = n + len(self.retired)
        self.catalog = None if full <= LISTED_MAX else catalog_digest((*self._keys.tolist(), *self.retired))
        """The digest of the full set when offers record it packed (more than ``LISTED_MAX`` tools)."""
        self._names: OrderedDict[frozenset[str], Mask] = OrderedDict()

    @staticmethod
    def _members(per_tool: Sequence[Availability], attr: str) -> dict[str, Mask]:
        out: dict[str, list[int]] = {}
        for i, a in enumerate(per_tool):
            for value in getattr(a, attr):
                out.setdefault(value, []).append(i)
        return {value: _flag(len(per_tool), idx) for value, idx in out.items()}

    def __len__(self) -> int:
        return len(self.specs)

    def permitted(self, principal: Principal) -> Mask:
        """Which tools ``principal`` holds every scope of (cached per distinct scope set).

        Same decision as ``authorize`` at call time, computed per pattern (see ``_scopes``).
        """
        key = tuple(principal.scopes)
        with self._lock:
            mask = self._permissions.get(key)
            if mask is not None:
                self._permissions.move_to_end(key)
                return mask
        mask = self._scopes.permitted(key)  # outside the lock: two threads may both compute it
        with self._lock:
            self._permissions[key] = mask
            if len(self._permissions) > _PERMISSION_CACHE:
                self._permissions.popitem(last=False)
        return mask

    def _requested(self, names: frozenset[str]) -> Mask:
        """Which tools ``names`` names (cached per set: an agent loop offers the same names each turn)."""
        with self._lock:
            mask = self._names.get(names)
            if mask is not None:
                self._names.move_to_end(names)
                return mask
        mask = _flag(len(self.specs), (self._position[x] for x in names if x in self._position))
        with self._lock:
            self._names[names] = mask
            if len(self._names) > _NAMES_CACHE:
                self._names.popitem(last=False)
        return mask

    def select(self, request: Request) -> Selection:
        """Apply the filters of the module docstring, rank, filter by permission, cut."""
        n = len(self.specs)
        reason = np.full(n, _OFFERED, dtype=np.int8)
        if request.names is not None:
            reason[~self._requested(request.names)] = _CODE["not_requested"]
        if request.phase is not None:
            ok = self._phase_free | self._phases.get(request.phase, np.zeros(n, dtype=np.bool_))
            reason[~ok & (reason == _OFFERED)] = _CODE["phase"]
        if request.capabilities is not None:
            for capability, needs in self._requires.items():
                if capability not in request.capabilities:
                    reason[needs & (reason == _OFFERED)] = _CODE["capability"]
        unlocked = np.zeros(n, dtype=np.bool_)
        for category in request.errors:
            hit = self._recovers.get(category)
            if hit is not None:
                unlocked |= hit
        reason[self._recovery & ~unlocked & (reason == _OFFERED)] = _CODE["error_state"]
        scores = self.ranker.scores(request.query) if request.query else None
        # Permission after ranking: however well a tool ranks, a principal lacking a scope of it
        # never sees it, and the cut below counts permitted tools only.
        eligible = reason == _OFFERED
        allowed = self.permitted(request.principal)
        reason[eligible & ~allowed] = _CODE["permission"]
        candidates = np.flatnonzero(eligible & allowed)
        if request.limit is None:
            ranked = self._order(candidates, scores)
        else:  # recovery tools whose error occurred are never cut, and lead
            pinned = candidates[unlocked[candidates]]
            rest = candidates[~unlocked[candidates]]
            room = max(0, request.limit - len(pinned))
            if len(rest) > room:
                keep = self._best(rest, scores, room)
                cut = np.ones(len(rest), dtype=np.bool_)
                cut[keep] = False
                reason[rest[cut]] = _CODE["rank_cut"]
                rest = rest[keep]
            ranked = np.concatenate([self._order(pinned, scores), self._order(np.sort(rest), scores)])
        ranked_scores = None if scores is None else tuple(scores[ranked].tolist())
        offered = tuple(self._spec_array[ranked].tolist())
        return Selection(offered, ranked_scores, self._keys, reason, self.retired, self.catalog)

    @staticmethod
    def _order(idx: npt.NDArray[np.intp], scores: npt.NDArray[np.float64] | None) -> npt.NDArray[np.intp]:
        """``idx`` best first; ties (and everything, without scores) in registration order."""
        if scores is None or len(idx) < 2:
            return idx
        return idx[np.argsort(-scores[idx], kind="stable")]

    @staticmethod
    def _best(
        idx: npt.NDArray[np.intp], scores: npt.NDArray[np.float64] | None, k: int
    ) -> npt.NDArray[np.intp]:
        """Positions in ``idx`` of its ``k`` best (ties: registration order), unordered."""
        if scores is None or k == 0:
            return np.arange(min(k, len(idx)))
        values = scores[idx]
        kth = np.partition(values, len(values) - k)[len(values) - k]  # the k-th highest score
        above = np.flatnonzero(values > kth)
        ties = np.flatnonzero(values == kth)[: k - len(above)]  # idx is ascending: earliest first
        return np.concatenate([above, ties])


def request_of(
    principal: Principal,
    *,
    query: str | None = None,
    limit: int | None = None,
    phase: str | None = None,
    capabilities: Iterable[str] | None = None,
    errors: Iterable[str] = (),
    names: Iterable[str] | None = None,
) -> Request:
    """A :class:`Request` from plain iterables (sets are frozen here)."""
    return Request(
        principal=principal,
        query=query,
        limit=limit,
        phase=phase,
        capabilities=None if capabilities is None else frozenset(capabilities),
        errors=frozenset(errors),
        names=None if names is None else frozenset(names),
    )


_READ_VERBS: Final = frozenset(
    {
        "get",
        "list",
        "find",
        "search",
        "read",
        "show",
        "fetch",
        "lookup",
        "query",
        "describe",
        "count",
        "check",
        "view",
    }
)
_EFFECT_RANK: Final = {"none": 0, "read": 0, "write": 1, "external": 2}
_RISK_RANK: Final = {"low": 0, "medium": 1, "high": 2}


def _verb(name: str) -> str:
    """The action word a tool name starts with (``archive`` of ``archive_project`` / ``archiveProject``)."""
    head = name.replace("-", "_").replace(".", "_").split("_", 1)[0]
    for i, ch in enumerate(head[1:], 1):
        if ch.isupper():
            return head[:i].lower()
    return head.lower()


_tool_verb: Final = functools.lru_cache(maxsize=1 << 16)(_verb)
""":func:`_verb` of a registered tool's name, kept (an unknown name's suggestions read every tool's)."""


def _risk(spec: ToolSpec) -> int:
    if spec.risk is not None:
        return _RISK_RANK[spec.risk]
    return 0 if _EFFECT_RANK[spec.effect] == 0 else 1


def safe_suggestions(
    requested: str, offered: Sequence[ToolSpec], known: ToolSpec | None = None, *, n: int = 3
) -> list[str]:
    """Close names worth suggesting for an unknown tool name: never a different effect or a higher risk.

    ``known`` is the requested tool when the catalog has it but this run may not call it: a
    suggestion then has its effect and at most its risk. Otherwise the requested name's own verb
    stands for what it meant: a read verb (``get``, ``list``, ``find``…) is pointed at reads only;
    any other verb only at tools with the same verb (``delete_projet`` → ``delete_project``, never
    ``archive_project`` → ``delete_project``, never ``refund`` → ``charge``). Ordered by similarity
    (difflib ratio ≥ 0.6), at most ``n``.
    """
    from difflib import SequenceMatcher, get_close_matches

    by_name = {s.name: s for s in offered}
    verb = _verb(requested)
    near: dict[str, bool] = {}  # per verb of the offered tools: a few dozen, whatever the catalog

    def near_verb(theirs: str) -> bool:
        found = near.get(theirs)
        if found is None:
            found = near[theirs] = SequenceMatcher(None, verb, theirs).ratio() >= 0.8
        return found

    def safe(spec: ToolSpec) -> bool:
        if known is not None:
            return spec.effect == known.effect and _risk(spec) <= _risk(known)
        if verb in _READ_VERBS:
            return _EFFECT_RANK[spec.effect] == 0
        theirs = _tool_verb(spec.name)
        if theirs == verb:
            return True
        # a misspelt verb ("ad" for "add") may point at a tool without effects, never at a write
        return _EFFECT_RANK[spec.effect] == 0 and near_verb(theirs)

    allowed = sorted(name for name, spec in by_name.items() if safe(spec))
    return get_close_matches(requested, allowed, n=n, cutoff=0.6)
