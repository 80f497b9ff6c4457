"""ToolSpec: everything the runtime knows about one version of one tool (DESIGN §3)."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from actionspace._canonical import digest_json, json_copy
from actionspace.catalog._callables import accepts, callee, unwrapped
from actionspace.errors import ToolDefinitionError

__all__ = [
    "EFFECTS",
    "HIGH_RISK_ARG_NAMES",
    "BatchMode",
    "Completion",
    "Cost",
    "Effect",
    "Idempotency",
    "Isolation",
    "Labels",
    "Lifecycle",
    "RetryPolicy",
    "Risk",
    "ToolSpec",
    "WriteMode",
    "schema_hash",
]

DEFAULT_TIMEOUT_S = 30.0
"""A tool's per-attempt timeout when it declares none."""

Effect = Literal["none", "read", "write", "external"]
Risk = Literal["low", "medium", "high"]
Idempotency = Literal["native", "query", "none"]
Lifecycle = Literal["active", "deprecated", "retired"]
BatchMode = Literal["all_or_nothing", "per_item", "chunked"]
Isolation = Literal["latest", "at_version", "snapshot"]
WriteMode = Literal["overwrite", "conditional", "append"]
Completion = Literal["sent", "accepted", "delivered"]
Confidentiality = Literal["public", "internal", "secret"]
Integrity = Literal["trusted", "untrusted"]

EFFECTS: tuple[Effect, ...] = ("none", "read", "write", "external")
_RISKS: tuple[Risk, ...] = ("low", "medium", "high")
_IDEMPOTENCY: tuple[Idempotency, ...] = ("native", "query", "none")
_LIFECYCLES: tuple[Lifecycle, ...] = ("active", "deprecated", "retired")
_BATCH_MODES: tuple[BatchMode, ...] = ("all_or_nothing", "per_item", "chunked")
_ISOLATIONS: tuple[Isolation, ...] = ("latest", "at_version", "snapshot")
_WRITE_MODES: tuple[WriteMode, ...] = ("overwrite", "conditional", "append")
_COMPLETIONS: tuple[Completion, ...] = ("sent", "accepted", "delivered")
_DEFAULT_RISK: dict[Effect, Risk] = {"none": "low", "read": "low", "write": "medium", "external": "high"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Labels:
    """Information-flow labels of a tool's output, and the ceiling of what a sink may receive."""

    confidentiality: Confidentiality = "internal"
    """Of the output: ``public < internal < secret``. Default ``internal``."""
    integrity: Integrity = "trusted"
    """Of the output; ``untrusted`` for content from outside (web, email, third parties)."""
    sink_max: Confidentiality | None = None
    """For sinks: the highest confidentiality its arguments may carry; None = ``internal``."""
    sink: bool | None = None
    """Its arguments leave the system. Default (None): True when ``effect="external"`` or
    ``sink_max`` is set."""
    high_risk_args: tuple[str, ...] | None = None
    """Arguments that decide where data or money goes. Default (None): the top-level arguments
    whose names match :data:`HIGH_RISK_ARG_NAMES` (exactly, or as a ``_``-suffix)."""
    readers: frozenset[str] | None = None
    """Who may read the output (principal ids or addresses); None = anyone."""

    def resolved(self, effect: str, arg_names: Iterable[str]) -> Labels:
        """These labels with ``sink`` and ``high_risk_args`` derived where unset."""
        sink = self.sink if self.sink is not None else (effect == "external" or self.sink_max is not None)
        risky = self.high_risk_args
        if risky is None:
            risky = tuple(a for a in arg_names if _high_risk_name(a))
        readers = frozenset(self.readers) if self.readers is not None else None
        return replace(self, sink=sink, high_risk_args=tuple(risky), readers=readers)


HIGH_RISK_ARG_NAMES: frozenset[str] = frozenset(
    {
        "recipient", "recipients", "to", "cc", "bcc", "email", "emails", "email_address",
        "user_email", "participants", "phone", "phone_number", "amount", "iban", "account",
        "account_number", "url", "link", "webhook", "password",
    }
)  # fmt: skip
"""Argument names treated as high-risk by default (where data or money goes, credentials)."""


@functools.lru_cache(maxsize=4096)
def _high_risk_name(name: str) -> bool:
    low = name.lower()
    return low in HIGH_RISK_ARG_NAMES or any(
        low.endswith("_" + n) for n in HIGH_RISK_ARG_NAMES if n not in ("to", "link", "account")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """Estimated cost of a call, in the budget's money unit.

    Every rate is a finite real number >= 0 (an ``int`` or a ``float``, never a ``bool``); anything
    else raises :class:`~actionspace.errors.ToolDefinitionError` when the tool is defined.
    """

    per_call: float = 0.0
    """Money per dispatched call. Default 0."""
    per_item: float = 0.0
    """Money per item acted on. Default 0."""
    per_byte: float = 0.0
    """Money per observation byte shown to the model. Default 0."""

    def __post_init__(self) -> None:
        for name in ("per_call", "per_item", "per_byte"):
            rate = getattr(self, name)
            if not _finite_rate(rate):
                raise ToolDefinitionError(f"Cost.{name} must be a finite number >= 0, got {rate!r}")


def _finite_rate(rate: object) -> bool:
    """Whether ``rate`` is an int or float (not a bool) that is finite as a float and >= 0."""
    if isinstance(rate, bool) or not isinstance(rate, int | float):
        return False
    try:
        return math.isfinite(float(rate)) and rate >= 0
    except OverflowError:
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Bounded retries for ``transient`` and ``rate_limited`` failures only.

    Both bounds always apply: whichever is reached first stops the retries.
    """

    max_attempts: int = 3
    """Total attempts including the first. Default 3; 1 disables retries."""
    deadline_s: float = 30.0
    """Seconds from the first attempt after which no new attempt starts. Default 30."""
    initial_backoff_s: float = 0.05
    """Delay before the second attempt, in seconds. Default 0.05."""
    backoff_multiplier: float = 2.0
    """Growth of the delay per attempt. Default 2."""
    max_backoff_s: float = 2.0
    """Cap on one delay, in seconds; a ``retry_after`` above the remaining deadline stops retries."""

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ToolDefinitionError("RetryPolicy.max_attempts must be >= 1")
        if self.deadline_s <= 0:
            raise ToolDefinitionError("RetryPolicy.deadline_s must be > 0")

    def backoff(self, attempt: int) -> float:
        """Delay in seconds before attempt number ``attempt + 1`` (attempts count from 1)."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier ** (attempt - 1))


NO_RETRY = RetryPolicy(max_attempts=1)


_HASHES: dict[str, str] = {}
"""Recent schema hashes by the schema's sorted-key JSON text (registering the same schema again,
as every fresh runtime of an evaluation does, skips the canonicalisation)."""


def schema_hash(schema: Mapping[str, Any]) -> str:
    """sha256 (hex, first 16 chars) of the RFC 8785 canonical JSON of a schema (its
    :func:`~actionspace._canonical.digest_json`: a bound such as 2**63 − 1 is beyond RFC 8785)."""
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        text = None
    found = _HASHES.get(text) if text is not None else None
    if found is None:
        found = hashlib.sha256(digest_json(schema)).hexdigest()[:16]  # int64 bounds too
        if text is not None:
            if len(_HASHES) >= 4096:
                _HASHES.clear()
            _HASHES[text] = found
    return found


@dataclass(frozen=True, slots=True, kw_only=True, weakref_slot=True)  # for catalog/_by_spec.py
class ToolSpec:
    """One version of one tool. Identified by ``name@version``; immutable once registered."""

    name: str
    version: str = "1"
    description: str = ""
    summary: str = ""
    """One line for progressive disclosure; defaults to the description's first line."""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: Mapping[str, Any] | None = None
    effect: Effect
    """``none`` (pure), ``read``, ``write`` or ``external`` (leaves the system). Required."""
    risk: Risk | None = None
    """Default from the effect: none/read → low, write → medium, external → high."""
    reversible: bool | None = None
    """Default: True for none/read, False otherwise."""
    reads: tuple[str, ...] = ()
    """Resource patterns templated from arguments, e.g. ``"calendar:{calendar_id}"``."""
    writes: tuple[str, ...] = ()
    idempotency: Idempotency = "none"
    status_query: Callable[..., Any] | None = None
    labels: Labels = field(default_factory=Labels)
    """Information-flow labels; ``labels={...}`` (a dict of Labels fields) is accepted too."""
    cost: Cost = field(default_factory=Cost)
    max_items: int | None = None
    """Most items one call may carry in ``items_arg`` (more is ``invalid_arguments``); None = no limit."""
    batch: BatchMode | None = None
    """Batch mode: ``all_or_nothing``, ``per_item`` or ``chunked`` (execution/batch.py); None = not one."""
    items_arg: str = "items"
    """The top-level argument holding a batch call's list of items. Default ``"items"``."""
    chunk_size: int | None = None
    """Items per sub-call of a ``chunked`` batch (required there, not allowed otherwise)."""
    owner: str | None = None
    data_class: str | None = None
    lifecycle: Lifecycle = "active"
    deprecated_by: str | None = None
    items_from: str | None = None
    """A top-level list argument whose length budgets count as the call's items (``get_many(ids=[…])``
    counts ``len(ids)``); a batch tool's items are counted anyway. None: the call is one item."""
    cache_ttl: float | None = None
    transaction: str | None = None
    """Name of a runtime environment (``rt.environment``) whose transaction this tool can join in an
    atomic plan group; ``fn`` then takes a ``transaction`` parameter (None outside a group)."""
    cache_static: bool = False
    """Same arguments → same content (same content hash): cached results never expire by age."""
    scopes: tuple[str, ...] | None = None
    """Scopes a principal needs; default ``("<effect>:<name>",)``."""
    high_risk_args: tuple[str, ...] = ()
    """Top-level arguments that need approval when their value was inferred by the model."""
    timeout_s: float = 30.0  # DEFAULT_TIMEOUT_S
    """Per-attempt timeout in seconds. Default 30."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    blocking: bool | None = None
    """For sync functions: True runs them on a worker thread (timeout enforced), False inline in
    the caller (no thread hop, no timeout). Default: inline for ``effect="none"`` with the default
    timeout, a thread otherwise (a tool that declares its ``timeout_s`` gets it enforced)."""
    trim: str = "json-v1"
    """Trimming rule for the observation: ``json-v1``, ``log-v1``, ``search-v1``, ``web-v1``."""
    max_observation_bytes: int = 16_384
    fn: Callable[..., Any] | None = None
    """The implementation; receives the validated arguments as keyword arguments."""
    validators: tuple[Callable[..., Any], ...] = ()
    """Business validators ``V(ctx, call) -> Accepted | Rejected | NeedsApproval``."""
    refinements: tuple[Callable[..., Any], ...] = ()
    """Relational checks over the arguments, ``(args) -> Iterable[FieldError]``."""
    bindings: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    """Entity binding per top-level argument: ``resolver(ctx, value) -> [{"id", "label", ...}]``.
    One match rebinds the argument to its ``id``; several → ``ambiguous_reference``; none →
    ``invalid_arguments``. Never the first match."""
    requires_approval: bool = False
    """Every call needs a human decision before it runs."""
    coerce: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    """Turns validated JSON arguments into the Python values ``fn`` expects (set by ``@tool``)."""
    examples: tuple[Mapping[str, Any], ...] = ()
    preview: Callable[..., Any] | None = None
    """What the call would do, without doing it: called with the tool's arguments on a dry run
    (``rt.call(..., dry_run=True)``); its return value is the observation's ``data``."""
    verify: tuple[Any, ...] = ()
    """Post-conditions checked after the tool answered ok (``actionspace.verify``: ``read_back``,
    ``fresh``, ``no_other_items`` …); a rejection is an error observation naming the verifier."""
    completion: Completion | None = None
    """Which evidence proves the effect: ``sent``, ``accepted`` (the tool answered ok) or
    ``delivered`` (a post-condition that reads the effect back accepted it; one is required).
    None: not reported. The observation's ``diagnostics["completion"]`` says the level reached."""
    isolation: Isolation | None = None
    """What a read sees: ``latest`` (whatever is current), ``at_version`` (the version named in the
    arguments) or ``snapshot`` (one consistent snapshot). Pinned reads commute with writes in a plan."""
    write_mode: WriteMode | None = None
    """How a write lands: ``overwrite`` (last writer wins), ``conditional`` (only on the expected
    version; otherwise ``conflict``) or ``append`` (appends commute with each other in a plan)."""
    dedupe_window_s: float | None = None
    """Seconds the tool remembers an idempotency key (a resend after that is a new action)."""
    cancel: Callable[..., Any] | None = None
    """Asks a running call to stop: ``cancel(arguments, idempotency_key)`` returns ``"cancelled"``
    (it stopped before committing), ``"committed"`` (too late) or anything else (unknown)."""
    _schema_hash: str = field(init=False, repr=False, compare=False, default="")
    _is_async: bool = field(init=False, repr=False, compare=False, default=False)
    _streams: bool = field(init=False, repr=False, compare=False, default=False)
    _key: str = field(init=False, repr=False, compare=False, default="")
    _takes_key: bool = field(init=False, repr=False, compare=False, default=False)
    _described: dict[str, Any] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if not self.name or "@" in self.name:
            raise ToolDefinitionError(f"tool name {self.name!r} must be non-empty and contain no '@'")
        if self.effect not in EFFECTS:
            raise ToolDefinitionError(f"{self.name}: effect must be one of {EFFECTS}, got {self.effect!r}")
        if self.risk is not None and self.risk not in _RISKS:
            raise ToolDefinitionError(f"{self.name}: risk must be one of {_RISKS}, got {self.risk!r}")
        if self.idempotency not in _IDEMPOTENCY:
            raise ToolDefinitionError(f"{self.name}: idempotency {self.idempotency!r} not in {_IDEMPOTENCY}")
        if self.lifecycle not in _LIFECYCLES:
            raise ToolDefinitionError(f"{self.name}: lifecycle must be one of {_LIFECYCLES}")
        if self.idempotency == "query" and self.status_query is None:
            raise ToolDefinitionError(f"{self.name}: idempotency='query' needs a status_query")
        if self.input_schema.get("type", "object") != "object":
            raise ToolDefinitionError(f"{self.name}: input_schema must describe an object")
        if self.timeout_s <= 0:
            raise ToolDefinitionError(f"{self.name}: timeout_s must be > 0")
        self._check_batch()
        self._check_contract()
        object.__setattr__(self, "reads", tuple(self.reads))
        object.__setattr__(self, "writes", tuple(self.writes))
        for template in (*self.reads, *self.writes):
            try:
                list(string.Formatter().parse(template))
            except ValueError as exc:  # formatted with each call's arguments: it must parse
                raise ToolDefinitionError(f"{self.name}: resource template {template!r}: {exc}") from exc
        object.__setattr__(self, "high_risk_args", tuple(self.high_risk_args))
        labels = self.labels
        if isinstance(labels, Mapping):
            given = dict(labels)
            try:
                labels = Labels(**given)
            except TypeError as exc:
                raise ToolDefinitionError(f"{self.name}: labels={given!r}: {exc}") from exc
        props = self.input_schema.get("properties")
        names = list(props) if isinstance(props, Mapping) else []
        object.__setattr__(self, "labels", labels.resolved(self.effect, names))
        if self.risk is None:
            object.__setattr__(self, "risk", _DEFAULT_RISK[self.effect])
        if self.reversible is None:
            object.__setattr__(self, "reversible", self.effect in ("none", "read"))
        if self.blocking is None:  # a timeout the tool declares is one it gets: a thread enforces it
            object.__setattr__(self, "blocking", self.effect != "none" or self.timeout_s != DEFAULT_TIMEOUT_S)
        if self.scopes is None:
            object.__setattr__(self, "scopes", (f"{self.effect}:{self.name}",))
        if not self.summary and self.description:
            object.__setattr__(self, "summary", self.description.strip().splitlines()[0][:200])
        try:
            object.__setattr__(self, "_schema_hash", schema_hash(self.input_schema))
        except (ValueError, TypeError) as exc:  # NaN, infinity, a non-JSON value: the model reads JSON
            raise ToolDefinitionError(f"{self.name}: input_schema holds a value JSON cannot: {exc}") from exc
        outer = callee(self.fn)
        object.__setattr__(self, "_is_async", inspect.iscoroutinefunction(outer))
        code = unwrapped(outer)
        object.__setattr__(
            self, "_streams", inspect.isasyncgenfunction(code) or inspect.isgeneratorfunction(code)
        )
        object.__setattr__(self, "_key", f"{self.name}@{self.version}")
        object.__setattr__(self, "_takes_key", accepts(self.fn, "idempotency_key"))
        if self.transaction is not None and self.fn is not None and not accepts(self.fn, "transaction"):
            raise ToolDefinitionError(f"{self.name}: a transaction tool needs a transaction parameter")
        if self.idempotency == "native" and self.fn is not None and not self._takes_key:
            raise ToolDefinitionError(f"{self.name}: idempotency='native' needs an idempotency_key parameter")

    def _check_batch(self) -> None:
        if self.max_items is not None and self.max_items < 1:
            raise ToolDefinitionError(f"{self.name}: max_items must be >= 1")
        if self.batch is not None and self.batch not in _BATCH_MODES:
            raise ToolDefinitionError(f"{self.name}: batch must be one of {_BATCH_MODES} or None")
        if (self.batch == "chunked") != (self.chunk_size is not None):
            raise ToolDefinitionError(f"{self.name}: chunk_size is required for, and only for, chunked")
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ToolDefinitionError(f"{self.name}: chunk_size must be >= 1")
        props = self.input_schema.get("properties")
        if self.batch is not None and isinstance(props, Mapping) and self.items_arg not in props:
            raise ToolDefinitionError(f"{self.name}: batch tool has no argument {self.items_arg!r}")

    def _check_contract(self) -> None:
        if self.isolation is not None and self.isolation not in _ISOLATIONS:
            raise ToolDefinitionError(f"{self.name}: isolation must be one of {_ISOLATIONS}")
        if self.write_mode is not None:
            if self.write_mode not in _WRITE_MODES:
                raise ToolDefinitionError(f"{self.name}: write_mode must be one of {_WRITE_MODES}")
            if self.effect not in ("write", "external"):
                raise ToolDefinitionError(f"{self.name}: write_mode is for write/external tools")
        if self.dedupe_window_s is not None:
            if not self.dedupe_window_s > 0:
                raise ToolDefinitionError(f"{self.name}: dedupe_window_s must be > 0")
            if self.idempotency == "none":
                raise ToolDefinitionError(f"{self.name}: dedupe_window_s needs idempotency native or query")
        object.__setattr__(self, "verify", tuple(self.verify))
        for check in self.verify:
            if not callable(check) and not hasattr(check, "after"):
                raise ToolDefinitionError(f"{self.name}: verify holds {check!r}, which is not a verifier")
        if self.completion is not None:
            if self.completion not in _COMPLETIONS:
                raise ToolDefinitionError(f"{self.name}: completion must be one of {_COMPLETIONS}")
            if self.completion == "delivered" and not any(
                getattr(v, "proves", None) == "delivered" for v in self.verify
            ):
                raise ToolDefinitionError(
                    f"{self.name}: completion='delivered' needs a verifier that reads the effect back "
                    "(verify=[read_back(...)])"
                )

    def contract_note(self) -> str:
        """One sentence for the model on the declared isolation, write mode, dedupe window, dry run
        and completion evidence ("" when none is declared)."""
        parts: list[str] = []
        if self.isolation is not None:
            parts.append(
                {
                    "latest": "reads the latest state",
                    "at_version": "reads the version named in its arguments",
                    "snapshot": "reads one consistent snapshot",
                }[self.isolation]
            )
        if self.write_mode is not None:
            parts.append(
                {
                    "overwrite": "overwrites (last write wins)",
                    "conditional": "writes only if the resource is still at the expected version, "
                    "else conflict",
                    "append": "appends (never replaces)",
                }[self.write_mode]
            )
        if self.dedupe_window_s is not None:
            parts.append(f"dedupes a repeated request for {self.dedupe_window_s:g}s")
        if self.preview is not None:
            parts.append("supports a dry run that previews the effect")
        if self.completion is not None:
            parts.append(f"its effect is confirmed as {self.completion}")
        return ("Contract: " + "; ".join(parts) + ".") if parts else ""

    @property
    def key(self) -> str:
        """``name@version``."""
        return self._key

    @property
    def schema_hash(self) -> str:
        """Hash of ``input_schema`` (see :func:`schema_hash`); recorded with every offer."""
        return self._schema_hash

    @property
    def takes_key(self) -> bool:
        """True when ``fn`` has an ``idempotency_key`` parameter: the runtime passes its key there."""
        return self._takes_key

    @property
    def is_async(self) -> bool:
        """True when ``fn`` is a coroutine function (awaited, never put on a thread)."""
        return self._is_async

    @property
    def streams(self) -> bool:
        """True when ``fn`` is a (sync or async) generator function: a streaming tool."""
        return self._streams

    @property
    def has_side_effects(self) -> bool:
        return self.effect in ("write", "external")

    def evolve(self, **changes: Any) -> ToolSpec:
        """A copy with some fields changed (a new version should change ``version`` too)."""
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """The definition as the model may see it (no implementation details). A new dict each
        time, its ``input_schema`` a copy all the way down (the caller may change it), built once
        per spec: an agent loop offers every turn."""
        described = self._described
        if described is None:
            described = {
                "name": self.name,
                "version": self.version,
                "description": self.description,
                "input_schema": self.input_schema,
                "effect": self.effect,
                "risk": self.risk,
                "schema_hash": self.schema_hash,
                **self._contract(),
            }
            object.__setattr__(self, "_described", described)
        return {**described, "input_schema": json_copy(self.input_schema)}

    def _contract(self) -> dict[str, Any]:
        declared = {
            "isolation": self.isolation,
            "write_mode": self.write_mode,
            "dedupe_window_s": self.dedupe_window_s,
            "completion": self.completion,
            "dry_run": True if self.preview is not None else None,
        }
        out: dict[str, Any] = {k: v for k, v in declared.items() if v is not None}
        if out:
            out["contract_note"] = self.contract_note()
        return out
