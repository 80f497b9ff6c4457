"""One run's state as the engine keeps it, and what a tool name means in that run.

A run pins every tool offered to it, or first resolved in it, as ``(version, input-schema hash,
definition hash)`` (:func:`pin_of`); a call names a tool and gets that pinned version,
``unknown_tool`` (with close names) or ``version_mismatch`` (with the current definition) — never a
silent reinterpretation. The definition hash covers everything the model (and an approver) is
shown of the tool, so a definition changed under the same version label (an MCP server's tool
after a gateway restart numbers its versions from "1" again) is a mismatch too.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from actionspace._canonical import clip_middle, digest_json
from actionspace._epoch import bump
from actionspace.catalog._by_spec import BySpec
from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.discovery.candidates import safe_suggestions
from actionspace.discovery.disclosure import full_definition, undescribed
from actionspace.errors import ActionError, RunStateError
from actionspace.ledger.run_state import SNAPSHOT_VERSION
from actionspace.policy.flow import FlowState
from actionspace.policy.principal import Principal

__all__ = ["Pin", "RunState", "definition_hash", "join_call_ids", "pin_of", "resolve"]

Pin = tuple[str, str, str]
"""``(version, input-schema hash, definition hash)`` of a tool as offered to a run. The definition
hash is ``""`` in a pin stored before it was kept (a run of the earlier two-element form): such a
pin is judged by its version and schema hash alone until the run pins the tool again."""

_HASHES: BySpec[str] = BySpec(65_536)
"""Each live spec's definition hash: an agent loop offers the same specs every turn (a spec no
runtime holds any more is not kept, nor its functions)."""


@dataclass(slots=True, weakref_slot=True)
class RunState:
    """What the runtime remembers of one run: its event counter, turns, offer pins and flow state."""

    run_id: str
    principal: Principal
    seq: itertools.count[int]
    nodes: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    pins: dict[str, Pin] = field(default_factory=dict)
    """Tool name → (version, schema hash, definition hash) as offered (or first resolved) in this
    run. Changed through :meth:`pin` or with :attr:`pins_version` moved, so the change is saved."""
    pins_version: int = 0
    """Moves with every change of :attr:`pins`: another process continuing the run must read an
    offer that replaced the tools by as many others (a count would not move)."""
    pinned_here: set[str] = field(default_factory=set)
    """Names :meth:`pin` pinned since the last save: kept over the pins of a newer snapshot of the
    same offer merged in (another process pinned other tools at the same time)."""
    explicit_offer: bool = False
    """True after ``Runtime.offer``: only pinned names may be called."""
    offer: str = ""
    """The id of the offer :attr:`pins` come from (``""``: none made since ids were kept)."""
    offer_base: str = ""
    """The id of the offer in force when :attr:`offer` was made (the one it replaced)."""
    own_offer: str = ""
    """The id of the last offer made in this process (not saved): while no offer made knowing it
    replaces it, this process judges its calls by it, whatever offer another process made at the
    same time (its model answers the offer it was shown)."""
    resolved: dict[str, tuple[int, ToolSpec]] = field(default_factory=dict)
    """Called name → (catalog generation, spec): a resolution stays valid until the catalog changes."""
    disclosure: bool = False
    """Progressive disclosure (``Runtime.offer(disclosure=True)``): only described tools may be called."""
    described: set[str] = field(default_factory=set)
    """Tool names whose full definition was read in this run (``Runtime.describe`` / ``describe_tool``)."""
    flow: FlowState = field(default_factory=FlowState)
    """The run's context label and what the model was shown (policy/flow.py)."""
    turn: int = 0
    """The user turn of the run (a session's ``user()`` starts the next); part of node identity."""
    began: str = ""
    """The framework run that began :attr:`turn` (adapters/_bridge.py), saved with it: that run
    resumed elsewhere from its own saved state stays in the turn (``""``: none named)."""
    errors_seen: set[str] | None = None
    """Error categories of the run's error observations (what unlocks recovery tools): empty for
    a new run, saved with the run's state (a new category before the error is shown), and kept up
    to date by every batch of events this process stores for the run. None when not known yet (a
    state saved without them): the first offer in this process reads them from the trace."""
    errors_mark: int = 0
    """Moves when :attr:`errors_seen` gains a category (so the run is saved)."""
    catalogs: set[str] = field(default_factory=set)
    """Digests of the large catalogs whose full set an offer of this process recorded in the
    run's trace (later offers of the same catalog record it packed, without the full set)."""
    saved: tuple[Any, ...] | None = None
    """The :meth:`mark` of the last snapshot saved (None: never saved)."""
    saved_label: tuple[Any, ...] | None = None
    """The :meth:`label_mark` of the last snapshot saved and waited for (None: never)."""
    texts_saved: int = 0
    """How many of the user's messages the store holds (:meth:`FlowState.texts_since` gives the
    rest, saved with the next snapshot)."""
    rev: int = 0
    """The revision of the stored snapshot this state was last saved as or merged with (several
    processes continuing the run save in turn: pipeline/runs.py)."""
    base: tuple[int, int] = (0, 0)
    """(:attr:`turn`, :attr:`pins_version`) as of :attr:`rev`: what this process changed since."""
    base_messages: int = 0
    """The user's messages in the run as of :attr:`rev`: those received here since are numbered
    after the ones another process saved meanwhile (:meth:`FlowState.merge`)."""
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)
    """Held to change the turn or the pins, to save, and to merge a newer snapshot in."""

    def pin(self, name: str, pin: Pin) -> None:
        """Pin ``name`` to ``(version, schema hash, definition hash)`` in this run."""
        with self.lock:
            self.pins[name] = pin
            self.pins_version += 1
            self.pinned_here.add(name)

    def offered(self, pins: dict[str, Pin], *, disclosure: bool) -> None:
        """An offer of this process: only the tools pinned in ``pins`` may be called, with
        progressive ``disclosure`` or not. The same offer again (an agent loop offers every turn)
        changes nothing; another gets a new id."""
        with self.lock:
            if pins != self.pins:
                self.pins = pins
                self.pins_version += 1
            elif self.explicit_offer and disclosure == self.disclosure:
                return
            self.explicit_offer, self.disclosure = True, disclosure
            bump()  # a kept precompiled entry is checked again (pipeline/fast_nodes.py)
            self.offer_base, self.offer = self.offer, secrets.token_hex(8)
            self.pinned_here = set()  # the offer's pins replace them
            self.own_offer = self.offer

    def absorb(self, data: Mapping[str, Any]) -> None:
        """Merge a newer snapshot another process saved (its ``"rev"``) into this state: its turn
        plus the turns taken here since :attr:`rev`, and likewise the user's messages; its offer
        unless this process made another since, or judges by an offer of its own made at the
        same time (:attr:`own_offer`); every label, artifact and described tool of both. Call ids
        and caches of this process are kept."""
        stored = _read(self.run_id, data)  # all of it, before anything here changes
        with self.lock:  # no turn or pin changes here meanwhile (labels: FlowState.merge)
            saved = self.saved
            others_saved = saved is not None and saved[1][1:] == self.label_mark()[1:]
            turn = self.base[0]
            stored_turn = stored.turn
            if self.turn <= turn:  # no turn began here since: the stored one is the latest
                self.began = stored.began
            self.turn = stored_turn + max(self.turn - turn, 0)
            self._absorb_offer(data, stored.pins)
            self.described |= stored.described
            who = data.get("principal")
            if isinstance(who, Mapping) and who != self.principal.to_dict():
                self.principal = stored.principal  # the run's first
            if stored.errors is not None and self.errors_seen is not None:
                before = len(self.errors_seen)
                self.errors_seen |= stored.errors
                self.errors_mark += len(self.errors_seen) != before
            stored_flow = stored.flow
            flow_saved = (saved[0], saved[1][0]) if saved is not None and others_saved else None
            merged = self.flow.merge(stored_flow, received_after=self.base_messages, saved_at=flow_saved)
            self.texts_saved = max(self.texts_saved, stored_flow.user_count)
            self.base_messages = stored_flow.user_count
            self.rev = stored.rev
            self.base = (stored_turn, self.pins_version)
            if merged is not None:  # nothing of this process waits to be saved: the state is as stored
                self.saved = (merged[0], (merged[1], *self.label_mark()[1:]))
                self.saved_label = self.saved[1]

    def _absorb_offer(self, data: Mapping[str, Any], stored_pins: dict[str, Pin]) -> None:
        """Take the stored offer, unless this process's own offer stands beside it: the stored
        one is the offer it replaced, or one made at the same time (both replaced the same). Under
        the same offer, the tools pinned here since the last save (a tool first resolved, say)
        are kept beside those another process pinned meanwhile."""
        offer, offer_base = str(data.get("offer") or ""), str(data.get("offer_base") or "")
        if (
            offer != self.offer
            and self.own_offer == self.offer != ""
            and (offer in (self.offer_base, "") or offer_base == self.offer_base)
        ):
            return
        if offer == self.offer:
            stored_pins = {**stored_pins, **{n: self.pins[n] for n in self.pinned_here if n in self.pins}}
        else:
            self.pinned_here = set()  # pinned under the offer the stored one replaced
        self.offer, self.offer_base = offer, offer_base
        if (
            stored_pins != self.pins
            or bool(data.get("explicit_offer")) != self.explicit_offer
            or bool(data.get("disclosure")) != self.disclosure
        ):
            self.pins = stored_pins
            self.pins_version += 1
            self.explicit_offer = bool(data.get("explicit_offer"))
            self.disclosure = bool(data.get("disclosure"))
            self.resolved = {}  # resolved again under the offer now in force
            bump()

    def mark(self) -> tuple[Any, ...]:
        """Changes whenever :meth:`snapshot` would: compared at each flush, a tuple of ints.

        ``(flow.version, label_mark())``, built here without :meth:`label_mark`'s own call (this
        runs at every call's flush; pipeline/_direct.py builds it inline too: change all three
        together)."""
        flow = self.flow
        return (
            flow.version,
            (
                flow.label_version,
                self.turn,
                self.pins_version,
                self.explicit_offer,
                self.disclosure,
                len(self.described),
                id(self.principal),
                self.errors_mark,
            ),
        )

    def label_mark(self) -> tuple[Any, ...]:
        """Changes whenever what a later call of the run may do changes: the principal, turn, pins,
        offer and disclosure, and the flow state's labels (not the call ids kept behind them).
        :meth:`mark` builds the same tuple inline: change both together."""
        return (
            self.flow.label_version,
            self.turn,
            self.pins_version,
            self.explicit_offer,
            self.disclosure,
            len(self.described),
            id(self.principal),
            self.errors_mark,
        )

    def snapshot(self) -> dict[str, Any]:
        """What any process continuing this run rebuilds it from (:meth:`restore`): JSON."""
        return {
            "v": SNAPSHOT_VERSION,
            "principal": self.principal.to_dict(),
            "turn": self.turn,
            **({"began": self.began} if self.began else {}),
            "pins": {name: list(pin) for name, pin in self.pins.items()},
            "explicit_offer": self.explicit_offer,
            **({"offer": self.offer, "offer_base": self.offer_base} if self.offer else {}),
            "disclosure": self.disclosure,
            "described": sorted(self.described),
            "flow": self.flow.to_state(),
            **({} if self.errors_seen is None else {"errors": sorted(self.errors_seen)}),
        }

    @classmethod
    def restore(
        cls, run_id: str, data: Mapping[str, Any], seq: itertools.count[int], first_node: int
    ) -> RunState:
        """The run a :meth:`snapshot` describes, continued with event numbers from ``seq``.

        Raises :class:`~actionspace.errors.RunStateError` when ``data`` cannot be read as one."""
        stored = _read(run_id, data)
        run = cls(
            run_id,
            stored.principal,
            seq,
            nodes=itertools.count(first_node),
            pins=stored.pins,
            explicit_offer=bool(data.get("explicit_offer")),
            offer=str(data.get("offer") or ""),
            offer_base=str(data.get("offer_base") or ""),
            disclosure=bool(data.get("disclosure")),
            described=stored.described,
            flow=stored.flow,
            turn=stored.turn,
            began=stored.began,
            errors_seen=stored.errors,
        )
        run.rev = stored.rev
        run.base = (run.turn, run.pins_version)
        run.base_messages = run.flow.user_count
        run.saved = run.mark()
        run.saved_label = run.label_mark()
        # a snapshot of the earlier form held its texts: the next save stores them apart
        run.texts_saved = run.flow.user_count if "user_count" in (data.get("flow") or {}) else 0
        return run


@dataclass(frozen=True, slots=True)
class _Stored:
    """What a snapshot holds that takes reading (:func:`_read`)."""

    principal: Principal
    turn: int
    began: str
    pins: dict[str, Pin]
    described: set[str]
    flow: FlowState
    errors: set[str] | None
    """The run's error categories, when the snapshot was saved by a process that kept every one
    of them (else None: read from its trace)."""
    rev: int


_SHAPES: dict[str, type | tuple[type, ...]] = {
    "v": int,
    "principal": Mapping,
    "turn": int,
    "began": str,
    "pins": Mapping,
    "explicit_offer": bool,
    "offer": str,
    "offer_base": str,
    "disclosure": bool,
    "described": list,
    "flow": Mapping,
    "errors": list,
    "rev": int,
}
"""The JSON type of each key of a snapshot (a key may be missing or null: an earlier form)."""


def _read(run_id: str, data: Mapping[str, Any]) -> _Stored:
    """Read ``data``, a snapshot of run ``run_id``, whole. Raises RunStateError when any part of
    it has another shape or it is of a later format: read as a default (public, turn 0, no
    pins), a damaged part would give a continuing process a new run's rights."""
    try:
        for key, kind in _SHAPES.items():
            value = data.get(key)
            if value is not None and not isinstance(value, kind):
                raise ValueError(f"its {key!r} is a {type(value).__name__}")
        version = data.get("v")
        if version is not None and not 0 < version <= SNAPSHOT_VERSION:
            raise RunStateError(
                f"the stored state of run {run_id!r} has format {version!r}; this actionspace reads"
                f" up to {SNAPSHOT_VERSION}: upgrade actionspace"
            )
        errors = data.get("errors")
        return _Stored(
            principal=Principal.from_dict(data.get("principal") or {}, allow_empty_id=True),
            turn=int(data.get("turn") or 0),
            began=str(data.get("began") or ""),
            pins=_stored_pins(data.get("pins")),
            described={str(n) for n in data.get("described") or ()},
            flow=FlowState.from_state(_with_texts(data)),
            errors=None if errors is None else {str(c) for c in errors},
            rev=int(data.get("rev") or 0),
        )
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        if isinstance(exc, RunStateError):
            raise
        raise RunStateError(f"the stored state of run {run_id!r} cannot be read: {exc}") from exc


def join_call_ids(base: Mapping[str, Any], other: Mapping[str, Any]) -> Mapping[str, Any]:
    """The snapshot ``base`` with the call ids behind the labels of ``other`` (another snapshot of
    the run, saved without waiting by another process or at another revision) kept too, and any
    label of ``other`` joined in; ``base`` itself when it holds them all already."""
    flow = FlowState.from_state(base.get("flow") or {})
    extra = FlowState.from_state(other.get("flow") or {})
    if set(extra.origins()) <= set(flow.origins()) and extra.context.flows_to(flow.context):
        return base
    flow.merge(extra)
    return {**base, "flow": flow.to_state()}


def _stored_pins(raw: Any) -> dict[str, Pin]:
    """The pins of a snapshot: three-element lists, or two (version, schema hash) from a snapshot
    of the earlier form. A pin of any other shape names no version, so the tool is a mismatch."""
    pins: dict[str, Pin] = {}
    for name, pin in raw.items() if isinstance(raw, Mapping) else ():
        if isinstance(pin, list | tuple) and len(pin) in (2, 3):
            pins[str(name)] = (str(pin[0]), str(pin[1]), str(pin[2]) if len(pin) == 3 else "")
        else:
            pins[str(name)] = ("", "", "")
    return pins


def definition_hash(spec: ToolSpec) -> str:
    """Hash of everything shown of ``spec`` (to the model, and to a person approving a call):
    description, summary, schemas, examples, effect, risk, reversibility, the contract, the
    approval rule and the output labels; not its version label."""
    hit = _HASHES.get(spec)
    if hit is not None:
        return hit
    shown = full_definition(spec)
    del shown["version"]
    labels = spec.labels
    shown["requires_approval"] = spec.requires_approval
    shown["labels"] = {
        "confidentiality": labels.confidentiality,
        "integrity": labels.integrity,
        "sink_max": labels.sink_max,
        "sink": labels.sink,
        "high_risk_args": list(labels.high_risk_args or ()),
        "readers": None if labels.readers is None else sorted(labels.readers),
    }
    try:
        encoded = digest_json(shown)
    except (TypeError, ValueError):  # an example or a schema value JSON cannot hold (NaN, an object)
        try:
            encoded = b"j" + json.dumps(shown, sort_keys=True, default=_kind).encode()
        except (TypeError, ValueError, RecursionError):  # an integer too long to print, say
            encoded = b"k" + repr((spec.schema_hash, spec.description, spec.effect, spec.risk)).encode()
    found = hashlib.sha256(encoded).hexdigest()[:16]
    _HASHES.put(spec, found)
    return found


def _kind(value: object) -> str:
    return f"<{type(value).__qualname__}>"  # never an address: the hash is compared across processes


def pin_of(spec: ToolSpec) -> Pin:
    """What a run pins of an offered (or first resolved) tool."""
    return (spec.version, spec.schema_hash, definition_hash(spec))


def _with_texts(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The flow part of a loaded snapshot, with the user's messages the store keeps beside it."""
    flow = data.get("flow") or {}
    texts = data.get("user_texts")
    return flow if texts is None else {**flow, "user_texts": texts}


def resolve(catalog: Catalog, run: RunState, name: str) -> ToolSpec | ActionError:
    """The spec a call's tool name means in this run (unknown_tool / version_mismatch otherwise).

    In a disclosure run, a tool never described in the run is ``unknown_tool`` naming ``describe_tool``.
    """
    if run.disclosure:
        never_described = undescribed(run, name)
        if never_described is not None:
            return never_described
    hit = run.resolved.get(name)
    if hit is not None and hit[0] == catalog.generation:
        return hit[1]
    found = _resolve(catalog, run, name)
    if isinstance(found, ToolSpec):
        run.resolved[name] = (catalog.generation, found)
    return found


def _resolve(catalog: Catalog, run: RunState, name: str) -> ToolSpec | ActionError:
    base, _, asked = name.partition("@")
    pin = run.pins.get(base)
    if pin is None:
        spec = None if run.explicit_offer else catalog.current(base)
        if spec is None:
            if run.explicit_offer:
                offered = sorted(run.pins)
                shown = [t for t in (catalog.current(name) for name in offered) if t is not None]
            else:
                shown = catalog.offerable()
                offered = sorted(s.name for s in shown)
            # A tool hidden from this run is answered as a name the catalog does not hold: judged
            # by its effect and risk, its suggestions would tell the model it exists.
            close = safe_suggestions(base, shown)
            return ActionError.of(
                "unknown_tool",
                f"no tool {clip_middle(base, 200)!r} is offered to this run"  # a name may be any size
                + (f"; did you mean {close[0]!r}?" if close else ""),
                alternatives=close or offered[:20],
                details={"offered": offered[:50], "requested": name[:200]},
            )
        pin = pin_of(spec)
        run.pin(base, pin)
    version, offered_hash, offered_definition = pin
    spec = catalog.find(f"{base}@{version}")
    current = catalog.current(base)
    if asked and asked != version:
        return _mismatch(run, base, f"{base}@{asked} was not offered; this run has {base}@{version}", current)
    if spec is None or spec.lifecycle == "retired" or spec.schema_hash != offered_hash:
        return _mismatch(
            run, base, f"{base}@{version} as offered to this run is no longer available", current
        )
    if offered_definition != definition_hash(spec):
        if offered_definition:  # same version label and input schema, another description, output schema…
            return _mismatch(
                run,
                base,
                f"{base}@{version} has changed since it was offered to this run "
                "(its description, schemas or annotations)",
                current,
            )
        run.pin(base, pin_of(spec))  # a pin of the earlier form: judged as before, kept whole from now on
    return spec


def _mismatch(run: RunState, base: str, message: str, current: ToolSpec | None) -> ActionError:
    version, schema, shown = run.pins[base]
    details: dict[str, Any] = {"offered": f"{base}@{version}", "offered_schema_hash": schema}
    if shown:
        details["offered_definition_hash"] = shown
    if current is not None:
        details["current"] = current.describe()
        details["current_definition_hash"] = definition_hash(current)
        run.pin(base, pin_of(current))
    return ActionError.of("version_mismatch", message, details=details)
