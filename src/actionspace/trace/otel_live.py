"""Live OpenTelemetry spans: one ``execute_tool`` span per call and per plan node, while the run goes on.

The engine hands every call's trace records to one sink when the call ends; :class:`LiveSpans`
wraps that sink, stores the records first, then emits the call's span — start and end times
taken from its events, attributes and events as :mod:`actionspace.trace.otel` names them (GenAI
semantic conventions: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type`` = the
ActionError category). The sink runs in the caller's thread (or a worker thread that copied its
context), so the span's parent is the caller's current span: a call made inside a user's span
shows up as its child.

Zero cost when OpenTelemetry is not configured: :func:`live_sink` returns the sink unchanged
unless ``opentelemetry`` is already imported and a tracer provider is set. Configure
OpenTelemetry before creating the Runtime, or call :func:`instrument` with a provider.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from actionspace._extras import require
from actionspace.trace.events import EventRecord, TraceEvent
from actionspace.trace.recorder import RecordSink

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = ["LiveSpans", "instrument", "live_sink"]

_UNSET_PROVIDERS: Final = frozenset({"ProxyTracerProvider", "NoOpTracerProvider"})


class HasSink(Protocol):
    """What :func:`instrument` wraps: the engine (``rt.engine``) or anything with its ``sink``."""

    sink: RecordSink


class LiveSpans:
    """A record sink that stores the records, then emits one span per finished call among them."""

    __slots__ = ("inner", "tracer")

    def __init__(self, inner: RecordSink, tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer

    def __call__(self, run_id: str, records: Sequence[EventRecord]) -> None:
        self.inner(run_id, records)  # a store that refuses them raises before any span is sent
        try:
            self._emit(run_id, records)
        except Exception:  # telemetry never fails a call
            import logging

            logging.getLogger("actionspace").exception("actionspace: emitting OpenTelemetry spans failed")

    def _emit(self, run_id: str, records: Sequence[EventRecord]) -> None:
        from actionspace.policy.redaction import redact_event
        from actionspace.trace import otel

        events = [  # as a viewer without labels:secret sees them, like an exported run
            TraceEvent(
                run_id=run_id, seq=seq, kind=kind, ts=ts, call_id=call_id, data=redact_event(data, None)
            )
            for seq, kind, ts, call_id, data in records
        ]
        calls, _ = otel.split_calls(events)
        for call in calls:
            if call.observed:  # a record batch that only settles an earlier call opens no span
                otel.export_call(self.tracer, call, None)


def live_sink(sink: RecordSink) -> RecordSink:
    """``sink`` wrapped in :class:`LiveSpans` when OpenTelemetry is configured, else ``sink`` itself."""
    api: Any = sys.modules.get("opentelemetry.trace")
    if api is None:
        return sink
    provider = api.get_tracer_provider()
    if type(provider).__name__ in _UNSET_PROVIDERS:
        return sink
    return LiveSpans(sink, _tracer(provider))


def instrument(engine: HasSink, *, tracer_provider: TracerProvider | None = None) -> LiveSpans:
    """Emit live spans for every call of ``engine`` (``rt.engine``) through ``tracer_provider``.

    Default: the global provider. Instrumenting twice replaces the provider, never doubles spans.
    Raises ConfigurationError naming ``actionspace[otel]`` when OpenTelemetry is not installed.
    """
    require("opentelemetry.trace", "otel", "live OpenTelemetry spans")
    inner = engine.sink.inner if isinstance(engine.sink, LiveSpans) else engine.sink
    live = LiveSpans(inner, _tracer(tracer_provider))
    engine.sink = live
    return live


def _tracer(provider: TracerProvider | None) -> Tracer:
    from actionspace.trace import otel

    return otel.tracer_of(provider)
