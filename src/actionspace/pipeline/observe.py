"""The observe stage: a tool outcome shaped into the observation envelope, and its trace events."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterable, Iterator
from typing import Any, Final

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError
from actionspace.execution.errors import map_exception
from actionspace.execution.executor import Failed, Outcome, Succeeded
from actionspace.execution.ready import Ready
from actionspace.execution.result import ToolResult
from actionspace.observation import ArtifactStore, Shaped, is_stream, shape
from actionspace.policy.labels import PUBLIC_TRUSTED, Integrity, Label
from actionspace.trace.recorder import Recorder
from actionspace.types import Observation, Provenance

__all__ = [
    "MAX_STREAM_CHARS",
    "MAX_STREAM_ITEMS",
    "fail",
    "observation_event",
    "observe",
    "observe_write",
    "plain_observation",
    "validated_event",
]

MAX_STREAM_CHARS: Final = 64 << 20
MAX_STREAM_ITEMS: Final = 100_000
"""Most items other than text read of an iterator a tool returned (an endless one of small objects
would otherwise fill memory until its tool's timeout: about 60 MiB a second of small rows)."""
"""Most characters (or bytes) read of an iterator a tool returned; the rest is cut, as its timeout
cuts it."""


class _Bounded:
    """An iterator a tool returned, read as the tool's output within its timeout,
    :data:`MAX_STREAM_CHARS` and :data:`MAX_STREAM_ITEMS`, then closed; what it raises is kept for
    the observation, not raised through the shaping (an iterator that never ends would hold the
    call, and fill the artifact store, forever)."""

    __slots__ = ("cut", "deadline", "failure", "source", "timeout_s")

    def __init__(self, source: Iterable[Any], timeout_s: float) -> None:
        self.source = source
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.cut: str | None = None
        self.failure: Exception | None = None

    def __iter__(self) -> Iterator[Any]:
        read = items = 0
        try:
            for chunk in self.source:
                yield chunk
                if isinstance(chunk, str | bytes | bytearray):
                    read += len(chunk)
                else:
                    read += 1
                    items += 1
                if read > MAX_STREAM_CHARS:
                    self.cut = f"read up to {MAX_STREAM_CHARS} characters"
                    return
                if items >= MAX_STREAM_ITEMS:
                    self.cut = f"read up to {MAX_STREAM_ITEMS} items"
                    return
                if time.monotonic() > self.deadline:
                    self.cut = f"read for the tool's timeout ({self.timeout_s:g} s)"
                    return
        except Exception as exc:  # the tool's own iterator failed midway
            self.failure = exc
        finally:
            close = getattr(self.source, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()


def fail(
    rec: Recorder, error: ActionError, call_id: str, tool: str, version: str | None = None
) -> Observation:
    """An error observation made by the runtime, recorded. It carries the label of what its
    message and details may quote: the call's arguments, which carry the run's context label (or,
    fed by reference, their sources' labels: the call's pending label)."""
    obs = Observation.failure(error, call_id=call_id, tool=tool, tool_version=version)
    flow = rec.run.flow
    pending = flow.pending.get(call_id)
    label: Label = flow.context if pending is None else flow.context.join(pending)
    if label is not PUBLIC_TRUSTED and label != PUBLIC_TRUSTED:
        trust: Integrity = "trusted" if pending is None else pending.integrity
        quoted = Provenance(source="runtime", trust=trust, labels=label.tags())
        obs = dataclasses.replace(obs, provenance=quoted)
    rec.add("observation", observation_event(obs))
    return obs


def _failed_provenance(ready: Ready, rec: Recorder) -> Provenance:
    """The provenance of a tool's failure: its message is the tool's own text, which may quote
    anything the tool was given or read, so it carries the call's output label (the tool's label
    joined with its arguments'); an untrusted tool's (an MCP server's) text is flagged as such."""
    label = ready.label
    if label is None:  # no flow check labelled it: the tool's label and the run's, as its arguments carry
        flow = rec.run.flow
        label = Label.from_tags(ready.compiled.output_labels, ready.compiled.spec.labels.integrity)
        label = label.join(flow.context)
        pending = flow.pending.get(ready.call_id)
        label = label if pending is None else label.join(pending)
    if label.integrity == "untrusted":
        return Provenance(source="tool", fetched_at=time.time(), trust="untrusted", labels=label.tags())
    return Provenance(source="runtime", labels=label.tags())


def validated_event(spec: ToolSpec, verdict: str, error: ActionError | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "verdict": verdict,
        "tool": spec.name,
        "version": spec.version,
        "schema_hash": spec.schema_hash,
    }
    if error is not None:
        data["category"] = error.category
        if error.field_errors:
            data["field_errors"] = [f.to_dict() for f in error.field_errors]
        else:
            data["message"] = error.message[:300]
    return data


def observe(
    ready: Ready,
    outcome: Outcome,
    *,
    artifacts: ArtifactStore | None,
    rec: Recorder,
    keep_raw: bool = False,
    shaped: Shaped | None = None,
) -> Observation:
    """Shape a tool outcome into the observation envelope and record it.

    ``keep_raw`` stores the full raw output as an artifact even when nothing was cut (streams).
    ``shaped``: the outcome's value shaped already, as this would (:func:`plain_observation`
    gives it for a value it cannot put in its envelope), so a large result is shaped once.
    An output cut (or kept raw) that the artifact store could not keep says why in
    ``diagnostics["artifact"]`` (``"not stored: no artifact store"``, a full disk…).
    """
    spec = ready.compiled.spec
    if isinstance(outcome, Failed):
        error = outcome.error
        obs = Observation.failure(error, call_id=ready.call_id, tool=spec.name, tool_version=spec.version)
        obs = dataclasses.replace(obs, provenance=_failed_provenance(ready, rec))
        rec.add("observation", observation_event(obs))
        return obs
    value = outcome.value
    effects: tuple[Any, ...] = ()
    version = remote = cursor = None
    total = None
    complete = True
    paging: dict[str, str] = {}
    if isinstance(value, ToolResult):
        value = value.checked()
        effects, version, remote = tuple(value.effects), value.resource_version, value.remote_id
        complete, cursor, total = value.complete, value.cursor, value.total
        if value.sort_key is not None:
            paging["sort_key"] = value.sort_key
        if value.after is not None:
            paging["after"] = value.after
        value = value.data
    bounded = None
    if shaped is None:
        if is_stream(value):
            value = bounded = _Bounded(value, spec.timeout_s)
        limit = spec.max_observation_bytes
        shaped = shape(value, rule=spec.trim, max_bytes=limit, artifacts=artifacts, keep_raw=keep_raw)
        if bounded is not None and bounded.failure is not None:
            error = map_exception(bounded.failure, side_effects=spec.has_side_effects)
            return fail(rec, error, ready.call_id, spec.name, spec.version)
        if bounded is not None and bounded.cut is not None:
            complete = False
    provenance = object.__new__(Provenance)
    label = ready.label
    provenance.__dict__.update(
        fetched_at=time.time(),
        resource_version=version,
        trust=spec.labels.integrity if label is None else label.integrity,
        labels=ready.compiled.output_labels if label is None else label.tags(),
    )
    fields: dict[str, Any] = {
        "call_id": ready.call_id,
        "tool": spec.name,
        "tool_version": spec.version,
        "data": shaped.data,
        "content_hash": shaped.content_hash,
        "provenance": provenance,
    }
    if effects:
        fields["effects"] = effects
    if shaped.trimming is not None:
        fields["trimming"] = shaped.trimming
    if shaped.artifact_ref is not None:
        fields["artifact_ref"] = shaped.artifact_ref
    if not (complete and shaped.complete):
        fields["complete"] = False
    if cursor is not None or total is not None:
        fields["cursor"], fields["total"] = cursor, total
    diagnostics: dict[str, Any] = dict(paging) if paging else {}
    if outcome.attempts > 1:
        diagnostics["attempts"] = outcome.attempts
    if remote is not None:
        diagnostics["remote_id"] = remote
    if bounded is not None and bounded.cut is not None:
        diagnostics["cut"] = f"the output did not end: {bounded.cut}"
    if shaped.not_stored is not None:  # the full output is not kept: say so where a reader looks
        diagnostics["artifact"] = f"not stored: {shaped.not_stored}"
    if ready.key is not None:
        diagnostics["idempotency_key"] = ready.key
    if spec.lifecycle == "deprecated":
        diagnostics["deprecated_by"] = spec.deprecated_by
    if diagnostics:
        fields["diagnostics"] = diagnostics
    obs = object.__new__(Observation)  # every field is already checked: skip the keyword checks
    obs.__dict__.update(fields)
    if effects or shaped.trimming is not None or shaped.artifact_ref is not None:
        rec.add("observation", observation_event(obs))
    else:
        rec.add(
            "observation",
            {"status": "ok", "tool": spec.name, "version": spec.version, "content_hash": shaped.content_hash},
        )
    return obs


def observation_event(obs: Observation) -> dict[str, Any]:
    data: dict[str, Any] = {"status": obs.status, "tool": obs.tool, "version": obs.tool_version}
    if obs.error is not None:
        data["category"] = obs.error.category
        data["recovery"] = list(obs.error.recovery)
        data["message"] = obs.error.message[:300]
    else:
        data["content_hash"] = obs.content_hash
        if obs.trimming is not None:
            data["trimming"] = obs.trimming.to_dict()
        if obs.artifact_ref is not None:
            data["artifact_ref"] = obs.artifact_ref
        if obs.effects:
            data["effects"] = [e.to_dict() for e in obs.effects]
    return data


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Result types shaped the same way every time (a first shape would consume an iterator)."""


def plain_observation(
    spec: ToolSpec,
    call_id: str,
    value: Any,
    label: Label,
    artifacts: ArtifactStore | None,
    now: float,
    tags: tuple[str, ...] | None = None,
) -> Observation | Shaped | None:
    """The observation :func:`observe` makes of an ``ok`` plain ``value`` of a call whose output
    label is ``label``, when it is shaped without cutting anything (the precompiled path). For a
    value it shaped and cut, the :class:`Shaped` value, for ``observe(..., shaped=)``; None for
    anything else (``observe`` itself shapes it then). ``tags``: ``label.tags()``, when the
    caller holds them already."""
    if type(value) not in _PLAIN:
        return None
    limit = spec.max_observation_bytes
    shaped = shape(value, rule=spec.trim, max_bytes=limit, artifacts=artifacts)
    cut = shaped.trimming is not None or shaped.artifact_ref is not None or not shaped.complete
    if cut or spec.lifecycle == "deprecated":  # observe() adds what this would leave out
        return shaped
    provenance = object.__new__(Provenance)
    provenance.__dict__.update(
        fetched_at=now,
        resource_version=None,
        trust=label.integrity,
        labels=label.tags() if tags is None else tags,
    )
    obs = object.__new__(Observation)  # every field is already checked, as observe() does
    obs.__dict__.update(
        call_id=call_id,
        tool=spec.name,
        tool_version=spec.version,
        data=shaped.data,
        content_hash=shaped.content_hash,
        provenance=provenance,
    )
    return obs


def observe_ready(
    ready: Ready, outcome: Outcome, rec: Recorder, artifacts: ArtifactStore | None
) -> Observation:
    """:func:`observe` for a call the precompiled path prepared: an ``ok`` plain result of one
    attempt is put in its envelope here (:func:`plain_observation`) and its ``observation`` event
    recorded; anything else goes through :func:`observe` itself."""
    spec = ready.compiled.spec
    if type(outcome) is Succeeded and outcome.attempts == 1 and ready.label is not None:
        obs = plain_observation(spec, ready.call_id, outcome.value, ready.label, artifacts, time.time())
        if isinstance(obs, Observation):
            observed: dict[str, Any] = {"status": "ok", "tool": spec.name, "version": spec.version}
            observed["content_hash"] = obs.content_hash
            rec.add("observation", observed)
            return obs
        return observe(ready, outcome, artifacts=artifacts, rec=rec, shaped=obs)
    return observe(ready, outcome, artifacts=artifacts, rec=rec)


def observe_write(
    ready: Ready, outcome: Outcome, rec: Recorder, artifacts: ArtifactStore | None
) -> Observation:
    """:func:`observe` for a side-effecting call the precompiled path prepared (``ready.key`` set):
    an ``ok`` plain result of one attempt is put in its envelope here, its idempotency key in its
    diagnostics as :func:`observe` puts it; anything else goes through :func:`observe` itself."""
    spec = ready.compiled.spec
    if type(outcome) is Succeeded and outcome.attempts == 1 and ready.label is not None:
        obs = plain_observation(spec, ready.call_id, outcome.value, ready.label, artifacts, time.time())
        if isinstance(obs, Observation):
            obs.__dict__["diagnostics"] = {"idempotency_key": ready.key}
            observed: dict[str, Any] = {"status": "ok", "tool": spec.name, "version": spec.version}
            observed["content_hash"] = obs.content_hash
            rec.add("observation", observed)
            return obs
        return observe(ready, outcome, artifacts=artifacts, rec=rec, shaped=obs)
    return observe(ready, outcome, artifacts=artifacts, rec=rec)
