"""Export stored runs to OpenTelemetry as spans that follow the GenAI semantic conventions.

One run becomes one ``invoke_agent`` span (``gen_ai.conversation.id`` = the run id) with one
child ``execute_tool {gen_ai.tool.name}`` span per tool call. Start and end times come from the
trace events, so an export made long after the run still shows when each call happened.

A tool span carries ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.tool.name``,
``gen_ai.tool.call.id`` and ``gen_ai.tool.type`` (``function``: the runtime executes the tool, not
the model provider). A call that ended in an error gets status ERROR and ``error.type`` = the
ActionError category (low cardinality, as the convention asks). What the convention has no name
for is kept under the ``actionspace.`` prefix: error category and recovery, idempotency key,
final ledger state, trimming rule and version, plan node id, verdicts of validation and
authorization, and ``actionspace.dry_run`` (with ``actionspace.dry_run.preview``) on a call that
was answered without being dispatched. Each trace event becomes a span event named
``actionspace.<kind>`` carrying its scalar fields; raw model output is left out (content capture
is opt-in in the convention). Events recorded while the run held secret (or reader-restricted)
data are exported as a viewer without ``labels:secret`` sees them
(:func:`~actionspace.policy.redaction.redact_events`): values redacted, names, verdicts and
categories kept. A telemetry backend is no reader of the run's labels.

Needs the ``opentelemetry-api`` package; tests use ``opentelemetry-sdk``'s in-memory exporter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from actionspace._extras import missing

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
    from opentelemetry.util.types import AttributeValue
except ImportError as exc:  # the core install: one line naming the extra
    raise missing("actionspace.trace.otel", "otel", exc) from exc

from actionspace._unicode import text_for_utf8
from actionspace._version import package_version
from actionspace.policy.redaction import redact_events
from actionspace.trace.events import CALL_START_KINDS, FindsRunIds, TraceEvent, TraceStore

__all__ = ["TOOL_TYPE", "TRACER_NAME", "export_call", "export_run", "export_runs", "split_calls", "tracer_of"]

TRACER_NAME: Final = "actionspace"
"""The instrumentation scope name of every exported span."""
TOOL_TYPE: Final = "function"
"""``gen_ai.tool.type`` of every tool span: tools run in the application, not at the provider."""

_ALL_RUNS: Final = 2**62
_HIDDEN_KEYS: Final = frozenset({"raw"})
_MAX_TEXT: Final = 300
_MAX_KEY: Final = 128
_MAX_ITEMS: Final = 64
_INT64: Final = range(-(2**63), 2**63)


@dataclass(slots=True, kw_only=True)
class _Call:
    """The events of one tool call, in ``seq`` order."""

    call_id: str
    started: float
    """Unix seconds: when the model output naming the call was parsed, else its first event."""
    tool: str | None = None
    events: list[TraceEvent] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)

    @property
    def observed(self) -> bool:
        return any(e.kind == "observation" for e in self.events)


def export_run(store: TraceStore, run_id: str, *, tracer_provider: TracerProvider | None = None) -> int:
    """Emit the spans of one stored run; return how many spans were emitted (0 for an unknown run).

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace.get_tracer_provider()``).
    Spans are ended here; with a batching span processor, call its ``force_flush`` to send them
    before the process exits.
    """
    events = redact_events(store.events(run_id), None)
    if not events:
        return 0
    tracer = tracer_of(tracer_provider)
    calls, run_level = split_calls(events)
    run_span = tracer.start_span(
        "invoke_agent",
        kind=SpanKind.INTERNAL,
        attributes=_run_attributes(run_id, events, calls),
        start_time=_ns(events[0].ts),
    )
    for event in run_level:
        _add_event(run_span, event)
    parent = trace.set_span_in_context(run_span)
    for call in calls:
        export_call(tracer, call, parent)
    finished = next((e for e in reversed(events) if e.kind == "run_finished"), None)
    status = _text(str(finished.data.get("status", "ok"))) if finished is not None else None
    if status not in (None, "ok"):
        run_span.set_attribute("error.type", status)
        run_span.set_status(Status(StatusCode.ERROR, f"run finished with status {status!r}"))
    run_span.end(end_time=_ns(max(events[-1].ts, events[0].ts)))
    return 1 + len(calls)


def export_runs(
    store: TraceStore,
    run_ids: Iterable[str] | None = None,
    *,
    tracer_provider: TracerProvider | None = None,
) -> int:
    """Emit the spans of each run in ``run_ids`` (default: every stored run, sorted by id).

    Returns the number of spans emitted in total; unknown run ids emit nothing.
    """
    ids = _all_run_ids(store) if run_ids is None else list(run_ids)
    return sum(export_run(store, rid, tracer_provider=tracer_provider) for rid in ids)


def tracer_of(provider: TracerProvider | None) -> Tracer:
    """The actionspace tracer of ``provider`` (None: the global provider)."""
    source = provider if provider is not None else trace.get_tracer_provider()
    return source.get_tracer(TRACER_NAME, package_version())


def split_calls(events: Sequence[TraceEvent]) -> tuple[list[_Call], list[TraceEvent]]:
    """Group a run's events into calls (in order of their first event) and run-level events.

    A second event of a kind in :data:`~actionspace.trace.events.CALL_START_KINDS` for a call id
    opens a new call that reuses the id (some models number their calls ``call_1`` every turn).
    """
    calls: list[_Call] = []
    open_calls: dict[str, _Call] = {}
    parsed_at: dict[str, float] = {}
    names: dict[str, str] = {}
    run_level: list[TraceEvent] = []
    for event in events:
        if event.call_id is None:
            run_level.append(event)
            if event.kind == "parsed":
                for listed in _listed(event.data.get("calls")):
                    if isinstance(listed, Mapping) and listed.get("id") is not None:
                        parsed_at[str(listed["id"])] = event.ts
                        names[str(listed["id"])] = str(listed.get("name", ""))
            continue
        call = open_calls.get(event.call_id)
        if call is None or (event.kind in CALL_START_KINDS and event.kind in call.kinds):
            started = parsed_at.pop(event.call_id, event.ts)
            call = _Call(call_id=event.call_id, started=min(started, event.ts), tool=names.get(event.call_id))
            open_calls[event.call_id] = call
            calls.append(call)
        call.events.append(event)
        call.kinds.add(event.kind)
        tool = event.data.get("tool")
        if isinstance(tool, str) and tool:
            call.tool = tool
    return calls, run_level


def _run_attributes(
    run_id: str, events: Sequence[TraceEvent], calls: Sequence[_Call]
) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.conversation.id": run_id,
        "actionspace.run.id": run_id,
        "actionspace.run.events": len(events),
        "actionspace.run.calls": len(calls),
        "actionspace.run.finished": any(e.kind == "run_finished" for e in events),
    }
    principal = events[0].data.get("principal") if events[0].kind == "run_started" else None
    if isinstance(principal, str):
        _put(attrs, "actionspace.principal", principal)
    return attrs


def export_call(tracer: Tracer, call: _Call, parent: Context | None) -> None:
    """Emit one call's ``execute_tool`` span under ``parent`` (None: the current span)."""
    tool = _text(call.tool or "unknown")  # a name as the model wrote it: UTF-8, cut
    span = tracer.start_span(
        f"execute_tool {tool}",
        context=parent,
        kind=SpanKind.INTERNAL,
        attributes=_call_attributes(call, tool),
        start_time=_ns(call.started),
    )
    for event in call.events:
        _add_event(span, event)
    observation = next((e for e in reversed(call.events) if e.kind == "observation"), None)
    if observation is not None and observation.data.get("status") == "error":
        found = observation.data.get("category")
        category = _text(found) if isinstance(found, str) and found else "unclassified"
        span.set_attribute("error.type", category)
        message = observation.data.get("message")
        described = _text(str(message)) if message else category
        span.set_status(Status(StatusCode.ERROR, described))
    span.end(end_time=_ns(max(call.events[-1].ts, call.started)))


def _call_attributes(call: _Call, tool: str) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": _text(call.call_id),
        "gen_ai.tool.type": TOOL_TYPE,
    }
    ledger_state: str | None = None
    for event in call.events:
        data = event.data
        if event.kind == "validated":
            _put(attrs, "actionspace.validation.verdict", data.get("verdict"))
            _put(attrs, "actionspace.tool.version", data.get("version"))
            _put(attrs, "actionspace.schema_hash", data.get("schema_hash"))
            paths = [
                _text(str(f.get("path"))) for f in _listed(data.get("field_errors")) if isinstance(f, Mapping)
            ]
            if paths:
                attrs["actionspace.validation.field_paths"] = paths
        elif event.kind == "authorized":
            _put(attrs, "actionspace.authorization.verdict", data.get("verdict"))
        elif event.kind == "dispatched":
            _put(attrs, "actionspace.plan.node_id", data.get("node_id"))
            _put(attrs, "actionspace.idempotency_key", data.get("idempotency_key"))
            _put(attrs, "actionspace.attempts", data.get("attempt"))
        elif event.kind == "dry_run":  # answered without dispatch: no effect, no ledger entry
            attrs["actionspace.dry_run"] = True
            attrs["actionspace.dry_run.preview"] = data.get("preview") is True
        elif event.kind == "attempt":
            _put(attrs, "actionspace.attempts", data.get("attempt"))
        elif event.kind == "ledger":
            _put(attrs, "actionspace.idempotency_key", data.get("key"))
            ledger_state = _text(str(data["to"])) if data.get("to") is not None else ledger_state
        elif event.kind == "observation":
            _observation_attributes(attrs, data)
    _put(attrs, "actionspace.ledger.state", ledger_state)
    return attrs


def _observation_attributes(attrs: dict[str, AttributeValue], data: Mapping[str, Any]) -> None:
    _put(attrs, "actionspace.status", data.get("status"))
    _put(attrs, "actionspace.error.category", data.get("category"))
    recovery = data.get("recovery")
    if isinstance(recovery, list | tuple) and recovery:
        attrs["actionspace.error.recovery"] = [_text(str(r)) for r in recovery[:_MAX_ITEMS]]
    trimming = data.get("trimming")
    if isinstance(trimming, Mapping):
        _put(attrs, "actionspace.trimming.rule", trimming.get("rule"))
        _put(attrs, "actionspace.trimming.rule_version", trimming.get("rule_version"))


def _put(attrs: dict[str, AttributeValue], key: str, value: Any) -> None:
    """Set ``key`` when ``value`` is a scalar OpenTelemetry accepts; ignore None and the rest."""
    scalar = _scalar(value)
    if scalar is not None:
        attrs[key] = scalar


def _scalar(value: Any) -> str | bool | int | float | None:
    """``value`` as an attribute value within the limits every exporter takes, or None."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, bool | float):
        return value
    if isinstance(value, int):  # OTLP carries int64: a bigger number is kept as its digits
        return value if value in _INT64 else _text(str(value))
    return None


def _text(value: str, limit: int = _MAX_TEXT) -> str:
    """``value`` cut to ``limit`` characters, an unpaired surrogate replaced (exporters encode UTF-8)."""
    cut = value if len(value) <= limit else value[: limit - 1] + "…"
    return text_for_utf8(cut)


def _listed(value: Any) -> Sequence[Any]:
    """The items of a list field, at most ``_MAX_ITEMS``; nothing when the field is no list."""
    return value[:_MAX_ITEMS] if isinstance(value, list | tuple) else ()


def _add_event(span: Span, event: TraceEvent) -> None:
    attrs: dict[str, AttributeValue] = {"actionspace.seq": event.seq}
    for key, value in event.data.items():
        scalar = _scalar(value)
        if key in _HIDDEN_KEYS or scalar is None or not isinstance(key, str):
            continue
        attrs[f"actionspace.{_text(key, _MAX_KEY)}"] = scalar
    span.add_event(f"actionspace.{_text(event.kind, _MAX_KEY)}", attributes=attrs, timestamp=_ns(event.ts))


def _ns(seconds: float) -> int:
    """Unix seconds (the trace's unit) to the nanoseconds OpenTelemetry takes."""
    return round(seconds * 1_000_000_000)


def _all_run_ids(store: TraceStore) -> list[str]:
    if isinstance(store, FindsRunIds):
        return store.run_ids()
    return sorted(summary.run_id for summary in store.runs(limit=_ALL_RUNS))
