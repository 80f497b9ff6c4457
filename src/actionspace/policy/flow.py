"""The information-flow engine: per-run context labels, argument labels, and the flow check.

The rule (DESIGN §8, the conservative rule): everything the model was shown in a run — the user's
input (:meth:`FlowState.add_user_input`) and every observation (:meth:`FlowState.observed`) —
joins the run's *context label*. A call's argument carries the context label unless it is bound
by reference:

- in a plan, an argument that is a ``{"$ref": "n1.data.x"}`` carries exactly n1's output label
  (an argument that mixes references with literal values also carries the context label);
- in a single call, ``sources={"recipient": ["user", "<call_id>"]}`` binds an argument to the
  user's input and/or earlier observations. The runtime checks that the value occurs in them
  (a string as a whole token, a number as a number; lists and objects leaf by leaf). If it does
  not, the argument falls back to the context label: a model cannot launder a value by claiming
  a trusted source. (It can still choose *which* value of a source to use.)

Defaults filled in by the schema carry no label. A call's output label is its tool's label
joined with all its argument labels. The flow check (:func:`flow_stage`) runs in the authorize
stage after scopes: Allow → on; Ask → the approval gate; Deny → ``policy_violation``, unless an
approved declassification of that exact call (argument digest) exists.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

from actionspace.catalog.spec import Labels, ToolSpec
from actionspace.policy._flow_sources import verified as _verified
from actionspace.policy.flow_bindings import Binding, bindings
from actionspace.policy.flow_policies import (
    ALLOW,
    DEFAULT_FLOW_POLICY,
    AllOf,
    Allow,
    AllowAll,
    AnyOf,
    Ask,
    Decision,
    Deny,
    FlowPolicy,
    FlowRequest,
    NoSecretToExternalSink,
    Origins,
    ReadClearance,
    ReadersCoverRecipients,
    UntrustedHighRiskArgs,
    UntrustedWrites,
)
from actionspace.policy.labels import PUBLIC_TRUSTED, Label
from actionspace.policy.occurrence import occurs
from actionspace.policy.stamped import Taken, label_of, stamped, taken
from actionspace.types import SHOWN_UNDER, Observation

__all__ = [
    "ALLOW",
    "DEFAULT_FLOW_POLICY",
    "USER",
    "AllOf",
    "Allow",
    "AllowAll",
    "AnyOf",
    "Ask",
    "Binding",
    "Decision",
    "Deny",
    "FlowPolicy",
    "FlowRequest",
    "FlowState",
    "NoSecretToExternalSink",
    "ReadClearance",
    "ReadersCoverRecipients",
    "UntrustedHighRiskArgs",
    "UntrustedWrites",
    "argument_labels",
    "bindings",
    "evaluate",
    "label_of",
    "occurs",
    "output_label",
    "spec_label",
]

USER = "user"
"""The source id of the user's input in ``sources=``."""
CONTEXT = "context"
MAX_REMEMBERED = 1024
"""Observations a run keeps for ``sources=`` checks, and messages of the user it keeps (the oldest
of each are forgotten first)."""
MAX_IDS_PER_LABEL = 16
"""Source ids kept per distinct label of the context (for error details and the trace)."""


@lru_cache(maxsize=4096)
def _spec_label(labels: Labels) -> Label:
    return Label(confidentiality=labels.confidentiality, integrity=labels.integrity, readers=labels.readers)


def spec_label(spec: ToolSpec) -> Label:
    """The label a tool's output carries by its spec (before its inputs are joined in)."""
    return _spec_label(spec.labels)


def output_label(spec: ToolSpec, arg_labels: Mapping[str, Label]) -> Label:
    """A call's output label: its tool's label joined with every argument label."""
    label = spec_label(spec)
    for lab in arg_labels.values():
        label = label.join(lab)
    return label


def _mark(obs: Observation, context: Label) -> None:
    """Give ``obs`` the tags of a restricting run label it was shown under (``repr`` hides its values)."""
    if context.readers is not None or context.confidentiality == "secret":
        obs.__dict__[SHOWN_UNDER] = context.tags()


class FlowState:
    """One run's flow state: the context label, the user's input, what the model was shown."""

    __slots__ = (
        "_full",
        "_groups",
        "_lock",
        "_origins",
        "artifacts",
        "context",
        "label_version",
        "pending",
        "seen",
        "tools",
        "user_count",
        "user_label",
        "user_texts",
        "version",
    )

    def __init__(self) -> None:
        self.context: Label = PUBLIC_TRUSTED
        """The join of everything the model was shown in this run."""
        self.user_label: Label = PUBLIC_TRUSTED
        self.user_texts: list[str] = []
        """The user's latest messages (at most :data:`MAX_REMEMBERED`), oldest first."""
        self.user_count = 0
        """How many messages the user sent in the run; the last of ``user_texts`` is number
        ``user_count`` (numbers from 1), whichever process received it."""
        self.seen: OrderedDict[str, tuple[Label, Any]] = OrderedDict()
        self.tools: dict[str, str] = {}
        """Call id of ``seen`` → the tool whose observation it holds (``""``: none named one)."""
        self.pending: dict[str, Label] = {}
        """Call id → output label, for calls that were let through (their errors carry it too)."""
        self.artifacts: OrderedDict[str, tuple[str, Label]] = OrderedDict()
        """Artifact ref shown to the model → (``name@version`` of the call that produced it, its
        label): ``read_artifact`` reads only these, authorized and labelled like that call."""
        self._groups: dict[Label, list[str]] = {}
        self._full: Label | None = None
        """A label whose call ids in ``_groups`` are at their cap (they never shrink): a call of
        it adds nothing there, known without hashing the label again."""
        self._origins: Origins | None = ()
        self._lock = threading.Lock()
        self.version = 0
        """Bumped whenever what :meth:`to_state` keeps changes (the engine saves it then)."""
        self.label_version = 0
        """Bumped when what the next call may do changes: the context label, the user's input, an
        artifact shown. Not when only a call id joins those kept behind a label (``version``)."""

    def _add(self, source: str, label: Label) -> None:
        if label == PUBLIC_TRUSTED:
            return
        ids = self._groups.setdefault(label, [])
        if len(ids) < MAX_IDS_PER_LABEL and source not in ids:
            ids.append(source)
            self._origins = None  # the sources changed; past the cap they do not, and neither do origins
            self.version += 1
        before = self.context
        joined = before.join(label)
        if joined is not before and joined != before:
            self.label_version += 1
        self.context = joined

    # ------------------------------------------------------------------ kept across processes
    def to_state(self) -> dict[str, Any]:
        """What another process continuing the run needs: labels, how many messages the user
        sent, the sources of the context and the artifacts shown. The messages themselves are
        not in it: each is stored once (:meth:`texts_since`), not with every snapshot after it.
        (Observations kept for ``sources=`` checks are not kept at all: a source another process
        does not know falls back to the context label.)"""
        with self._lock:
            return {
                "context": self.context.to_dict(),
                "user_label": self.user_label.to_dict(),
                "user_count": self.user_count,
                "groups": [[lab.to_dict(), list(ids)] for lab, ids in self._groups.items()],
                "artifacts": [[ref, tool, lab.to_dict()] for ref, (tool, lab) in self.artifacts.items()],
            }

    @classmethod
    def from_state(cls, data: Mapping[str, Any]) -> FlowState:
        """The flow state :meth:`to_state` described, with the user's latest messages in
        ``user_texts`` where the store keeps them apart (unknown keys are ignored)."""
        state = cls()
        state.context = Label.from_dict(data.get("context") or {})
        state.user_label = Label.from_dict(data.get("user_label") or {})
        texts = [str(t) for t in data.get("user_texts") or ()]
        state.user_texts = texts[-MAX_REMEMBERED:]
        state.user_count = max(int(data.get("user_count") or 0), len(texts))
        for lab, ids in data.get("groups") or ():
            state._groups[Label.from_dict(lab)] = [str(i) for i in ids][:MAX_IDS_PER_LABEL]
        for ref, tool, lab in data.get("artifacts") or ():
            state.artifacts[str(ref)] = (str(tool), Label.from_dict(lab))
        state._origins = None
        return state

    def merge(
        self, stored: FlowState, *, received_after: int | None = None, saved_at: tuple[int, int] | None = None
    ) -> tuple[int, int] | None:
        """Join into this state what ``stored`` holds (the run's state as another process saved
        it, :meth:`from_state`): its labels and the call ids behind them, the user's label, the
        artifacts shown, the user's messages. The messages numbered after ``received_after`` were
        received here and are not in ``stored`` (None: none): they are numbered after its own, so
        two messages received at once in two processes keep one number each. Atomic against
        calls writing to this state.

        ``saved_at``: (:attr:`version`, :attr:`label_version`) as this state was last saved.
        Returns the pair after the merge when it was ``saved_at`` before (nothing of this state
        waits to be saved: it is as stored), else None."""
        with self._lock:
            clean = saved_at == (self.version, self.label_version)
            for source, label in stored.origins():
                self._add(source, label)  # the context joins every label of the other process
            if not stored.context.flows_to(self.context):
                self._add("run_state", stored.context)  # labels whose call ids were not kept
            unsaved = 0 if received_after is None else max(0, self.user_count - received_after)
            if stored.user_count > self.user_count - unsaved:  # messages received elsewhere
                mine = self.user_texts[len(self.user_texts) - min(unsaved, len(self.user_texts)) :]
                self.user_texts = (stored.user_texts + mine)[-MAX_REMEMBERED:]
                self.user_count = stored.user_count + unsaved
                self.label_version += 1
            user_label = self.user_label.join(stored.user_label)
            if user_label != self.user_label:
                self.user_label = user_label
                self.label_version += 1
            for ref, shown in stored.artifacts.items():
                if ref not in self.artifacts:
                    self.artifacts[ref] = shown
                    self.label_version += 1
            self.version += 1
            return (self.version, self.label_version) if clean else None

    def add_user_input(self, text: str, label: Label = PUBLIC_TRUSTED) -> None:
        """The user's request (or a later message): joins the context; ``sources=["user"]`` reads it."""
        with self._lock:
            texts = self.user_texts
            texts.append(text)
            if len(texts) > MAX_REMEMBERED:
                del texts[0]
            self.user_count += 1
            self.user_label = self.user_label.join(label)
            self._add(USER, label)
            self.version += 1
            self.label_version += 1

    def observed(self, obs: Observation) -> Label:
        """The model was shown ``obs`` (and its items): it joins the context. Returns its label."""
        label = self._label(obs)
        with self._lock:
            self._shown(obs, label)
            self._trim()
        return label

    def observed_as(self, obs: Observation, label: Label, within: Label | None = None) -> None:
        """:meth:`observed` of an observation shaped with output label ``label`` (the precompiled path;
        pipeline/_direct.py writes it out: change both): a result carries ``label`` in its provenance and
        an error made from a failed outcome reads the pending ``label``, so the label is not read back from
        the tags. One with items or an artifact goes through :meth:`observed` (it remembers the artifact).
        ``within``: a run label that ``label`` adds nothing to; while it is still the run label and the
        call ids kept for ``label`` are at their cap, joining ``label`` changes nothing."""
        if obs.artifact_ref is not None or obs.items:
            self.observed(obs)
            return
        call_id, seen = obs.call_id, self.seen
        with self._lock:
            self.pending.pop(call_id, None)
            if within is not self.context or (
                label is not PUBLIC_TRUSTED and label is not self._full and self._room(label)
            ):
                self._add(call_id, label)
            seen[call_id] = (label, obs.data)
            seen.move_to_end(call_id)
            self.tools[call_id] = obs.tool
            context = self.context
            if context.readers is not None or context.confidentiality == "secret":
                _mark(obs, context)
            if len(seen) > MAX_REMEMBERED:
                self._trim()

    def _room(self, label: Label) -> bool:
        """Whether more call ids may join those kept behind ``label`` (else it is noted as full)."""
        if len(self._groups.get(label, ())) < MAX_IDS_PER_LABEL:
            return True
        self._full = label
        return False

    def observed_many(self, observations: Iterable[Observation]) -> None:
        """:meth:`observed` of each observation, in order (a plan's, once it ended): one lock."""
        self.observed_taken((obs, taken(obs)) for obs in observations)

    def observed_taken(self, shown: Iterable[tuple[Observation, Taken]]) -> None:
        """:meth:`observed_many` of observations each with what was read of it when its plan node settled
        (:func:`~actionspace.policy.stamped.taken`): a plain one is not read again (_shown's work, inline)."""
        with self._lock:
            pending, seen, tools = self.pending, self.seen, self.tools
            # a label at its cap of call ids whose last _add changed nothing, and the context then (quiet_at)
            quiet = quiet_at = cast("Label | None", None)  # while both stay, adding it again changes nothing
            last_tags, last_trust, last_label = cast("tuple[Any, str, Label]", ((), "", PUBLIC_TRUSTED))
            held = self.context  # self.context, read again only where it may change (_add, _shown)
            marks = held.readers is not None or held.confidentiality == "secret"  # what _mark asks
            for obs, (call_id, tags, trust, data, _status, _error, tool) in shown:
                if call_id is None:  # items or an artifact: read whole
                    self._shown(obs, self._label(obs))
                    quiet, held = None, self.context
                    marks = held.readers is not None or held.confidentiality == "secret"
                    continue
                own = pending.pop(call_id, None)
                if not tags:
                    label = PUBLIC_TRUSTED if own is None else own
                elif last_tags == tags and last_trust == trust:
                    label = last_label  # a plan's nodes of one tool share their tags
                else:
                    last_tags, last_trust, last_label = tags, trust, (label := stamped(tags, trust))
                if label is not PUBLIC_TRUSTED and (quiet is not label or quiet_at is not held):
                    versions = (self.version, self.label_version)
                    self._add(call_id, label)
                    full = len(self._groups.get(label, ())) >= MAX_IDS_PER_LABEL
                    same = self.context is held and versions == (self.version, self.label_version)
                    quiet, quiet_at = (label, held) if full and same else (None, None)
                    held = self.context
                    marks = held.readers is not None or held.confidentiality == "secret"
                if call_id in seen:  # (a new one goes last as it is)
                    seen.move_to_end(call_id)
                seen[call_id] = (label, data)
                tools[call_id] = tool
                if marks:
                    _mark(obs, held)
            self._trim()

    def _shown(self, obs: Observation, label: Label) -> None:
        for item in (obs, *obs.items):
            lab = label if item is obs else self._label(item)
            self._add(item.call_id, lab)
            _mark(item, self.context)
            self.seen[item.call_id] = (lab, item.data)
            self.seen.move_to_end(item.call_id)
            self.tools[item.call_id] = item.tool
            if item.artifact_ref is not None and item.tool_version is not None:
                self.artifacts[item.artifact_ref] = (f"{item.tool}@{item.tool_version}", lab)
                self.version += 1
                self.label_version += 1
                self.artifacts.move_to_end(item.artifact_ref)

    def _trim(self) -> None:
        while len(self.seen) > MAX_REMEMBERED:
            self.tools.pop(self.seen.popitem(last=False)[0], None)
        while len(self.artifacts) > MAX_REMEMBERED:
            self.artifacts.popitem(last=False)

    def glimpsed(self, obs: Observation) -> Label:
        """The model was shown a provisional observation of a call still running: its label (and
        the call's pending output label) join the context now, in case the final one never comes.
        The final observation is still :meth:`observed`. Returns the joined label."""
        with self._lock:
            label = label_of(obs) if obs.provenance.labels else PUBLIC_TRUSTED
            pending = self.pending.get(obs.call_id)
            if pending is not None:
                label = label.join(pending)
            self._add(obs.call_id, label)
        return label

    def label_for(self, obs: Observation) -> Label:
        """The label :meth:`observed` joins in for ``obs`` itself (its items aside); nothing changes."""
        if obs.provenance.labels:
            return label_of(obs)
        # made by the runtime (an error): it carries what the call would have produced
        pending = self.pending.get(obs.call_id)
        return pending if pending is not None else PUBLIC_TRUSTED

    def _label(self, obs: Observation) -> Label:
        label = self.label_for(obs)
        self.pending.pop(obs.call_id, None)
        return label

    def origins(self) -> Origins:
        """The context's sources, one (id, label) pair per remembered id of each distinct label."""
        origins = self._origins
        if origins is None:
            with self._lock:
                origins = tuple((i, lab) for lab, ids in self._groups.items() for i in ids)
                self._origins = origins
        return origins

    def texts_since(self, count: int) -> list[tuple[int, str]]:
        """The user's messages after the first ``count`` (those still remembered), numbered."""
        with self._lock:
            first = self.user_count - len(self.user_texts) + 1  # the number of user_texts[0]
            start = max(count + 1, first)
            return [(n, self.user_texts[n - first]) for n in range(start, self.user_count + 1)]

    def source(self, source_id: str) -> tuple[Label, list[Any]] | None:
        """(label, values) of a source id (``user`` or a call id); None when unknown or forgotten."""
        if source_id == USER:
            return (self.user_label, list(self.user_texts)) if self.user_texts else None
        hit = self.seen.get(source_id)
        return None if hit is None else (hit[0], [hit[1]])


# ---------------------------------------------------------------------- argument labels


def argument_labels(
    state: FlowState,
    arguments: Mapping[str, Any],
    *,
    sources: Mapping[str, Sequence[str]] | None = None,
    bound: Mapping[str, Binding] | None = None,
    defaults: Sequence[str] = (),
) -> tuple[dict[str, Label], dict[str, Origins], dict[str, list[str]]]:
    """(label, origins, how) per argument; ``how`` names the sources the label was read from."""
    ctx, ctx_origins = state.context, None
    labels: dict[str, Label] = {}
    origins: dict[str, Origins] = {}
    how: dict[str, list[str]] = {}
    for name, value in arguments.items():
        if bound is not None and name in bound:
            b = bound[name]
            labels[name], origins[name] = b.label, b.origins
            how[name] = [s for s, _ in b.origins]
            if not b.mixed:
                continue
            ctx_origins = ctx_origins if ctx_origins is not None else state.origins()
            labels[name], origins[name] = b.label.join(ctx), b.origins + ctx_origins
            how[name].append(CONTEXT)
            continue
        if name in defaults:
            labels[name], origins[name], how[name] = PUBLIC_TRUSTED, (), ["default"]
            continue
        claimed = sources.get(name) if sources is not None else None
        if claimed:
            verified = _verified(state, value, claimed)
            if verified is not None:
                labels[name], origins[name] = verified
                how[name] = [s for s, _ in verified[1]]
                continue
            how[name] = [CONTEXT, "unverified:" + ",".join(claimed)]
        else:
            how[name] = [CONTEXT]
        ctx_origins = ctx_origins if ctx_origins is not None else state.origins()
        labels[name], origins[name] = ctx, ctx_origins
    return labels, origins, how


@dataclass(frozen=True, slots=True)
class FlowCheck:
    """The outcome of computing a call's labels and asking the policy."""

    decision: Decision
    output: Label
    request: FlowRequest
    how: Mapping[str, list[str]] = field(default_factory=dict)


def evaluate(
    policy: FlowPolicy | None,
    state: FlowState,
    spec: ToolSpec,
    arguments: Mapping[str, Any],
    *,
    principal: Any,
    run_id: str,
    sources: Mapping[str, Sequence[str]] | None = None,
    bound: Mapping[str, Binding] | None = None,
    defaults: Sequence[str] = (),
    provenance: Mapping[str, tuple[Any, ...]] | None = None,
) -> FlowCheck:
    """Label a call's arguments and ask ``policy`` (None allows): the function the runtime uses."""
    labels, origins, how = argument_labels(state, arguments, sources=sources, bound=bound, defaults=defaults)
    request = FlowRequest(
        spec=spec,
        arguments=arguments,
        arg_labels=labels,
        principal=principal,
        run_id=run_id,
        origins=origins,
        provenance=provenance,
    )
    decision = ALLOW if policy is None else policy.check(request)
    return FlowCheck(decision, output_label(spec, labels), request, how)
