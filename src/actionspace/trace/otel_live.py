"""Live OpenTelemetry spans: one ``execute_tool`` span per call and per plan node, while the run goes on.

The engine hands every call's trace records to one sink when the call ends; :class:`LiveSpans`
wraps that sink, stores the records first, then emits the call's span — start and end times
taken from its events, attributes and events as :mod:`actionspace.trace.otel` names them (GenAI
semantic conventions: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type`` = the
ActionError category). The sink captures the caller's OpenTelemetry context, so the span's parent
is the caller's current span: a call made inside a user's span shows up as its child.

Spans are emitted by one background thread from a bounded queue, so a collector that is down or
slow never slows a call down: when the queue is full the call's spans are dropped and counted
(:attr:`LiveSpans.dropped`). :meth:`LiveSpans.flush` waits until the queued spans are emitted;
it also runs when the process exits.

Zero cost when OpenTelemetry is not configured: :func:`live_sink` returns the sink unchanged
unless ``opentelemetry`` is already imported and a tracer provider is set. Configure
OpenTelemetry before creating the Runtime, or call :func:`instrument` with a provider.
"""

from __future__ import annotations

import atexit
import logging
import queue
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from actionspace._extras import require
from actionspace.trace.events import EventRecord, TraceEvent
from actionspace.trace.recorder import RecordSink

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Tracer, TracerProvider

__all__ = ["LiveSpans", "flush", "instrument", "live_sink"]

_UNSET_PROVIDERS: Final = frozenset({"ProxyTracerProvider", "NoOpTracerProvider"})
_QUEUE_SIZE: Final = 2048
_EXIT_FLUSH_SECONDS: Final = 2.0
_log = logging.getLogger("actionspace")
_live: weakref.WeakSet[LiveSpans] = weakref.WeakSet()


class HasSink(Protocol):
    """What :func:`instrument` wraps: the engine (``rt.engine``) or anything with its ``sink``."""

    sink: RecordSink


class LiveSpans:
    """A record sink that stores the records, then queues one span per finished call among them."""

    __slots__ = ("__weakref__", "_done", "_pending", "_queue", "_worker", "dropped", "inner", "tracer")

    def __init__(self, inner: RecordSink, tracer: Tracer, *, queue_size: int = _QUEUE_SIZE) -> None:
        """``queue_size``: record batches waiting to be emitted (default 2048) before more are dropped."""
        self.inner = inner
        self.tracer = tracer
        self.dropped = 0
        """Record batches whose spans were dropped because the queue was full."""
        self._queue: queue.Queue[tuple[str, Sequence[EventRecord], Context]] = queue.Queue(queue_size)
        self._done = threading.Condition()
        self._pending = 0
        self._worker: threading.Thread | None = None
        _live.add(self)

    def __call__(self, run_id: str, records: Sequence[EventRecord]) -> None:
        self.inner(run_id, records)  # a store that refuses them raises before any span is queued
        from opentelemetry import context

        with self._done:
            try:
                self._queue.put_nowait((run_id, tuple(records), context.get_current()))
            except queue.Full:
                self.dropped += 1
                return
            self._pending += 1
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="actionspace-otel", daemon=True)
                self._worker.start()

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to ``timeout`` seconds until every queued span is emitted; False when time ran out."""
        deadline = time.monotonic() + timeout
        with self._done:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._done.wait(left)
        return True

    def _run(self) -> None:
        while True:
            run_id, records, parent = self._queue.get()
            try:
                self._emit(run_id, records, parent)
            except Exception:  # telemetry never fails a call
                _log.exception("actionspace: emitting OpenTelemetry spans failed")
            with self._done:
                self._pending -= 1
                self._done.notify_all()

    def _emit(self, run_id: str, records: Sequence[EventRecord], parent: Context) -> None:
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
                otel.export_call(self.tracer, call, parent)


def flush(timeout: float = 5.0) -> bool:
    """Wait up to ``timeout`` seconds in all until every live sink has emitted its queued spans;
    False when time ran out (the process exits within its budget however many sinks there are)."""
    deadline = time.monotonic() + timeout
    return all([live.flush(max(0.0, deadline - time.monotonic())) for live in list(_live)])


atexit.register(flush, _EXIT_FLUSH_SECONDS)


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
