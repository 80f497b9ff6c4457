"""The trace: every stage's decisions as events, the stores that keep them, and their export.

The ``actionspace trace`` command lives in :mod:`actionspace.trace.cli` (not imported here, so
the library does not pull in the CLI's dependencies).
"""

from actionspace.trace.events import (
    EVENT_KINDS,
    AppendsNew,
    ClaimsRuns,
    EventKind,
    FindsRunIds,
    RunSummary,
    TraceEvent,
    TraceStore,
)
from actionspace.trace.export import ImportResult, export_jsonl, import_jsonl, iter_jsonl
from actionspace.trace.memory import MemoryTraceStore
from actionspace.trace.sqlite import SqliteTraceStore
from actionspace.trace.store import default_store_url, open_trace_store, resolve_run_id

__all__ = [
    "EVENT_KINDS",
    "AppendsNew",
    "ClaimsRuns",
    "EventKind",
    "FindsRunIds",
    "ImportResult",
    "MemoryTraceStore",
    "RunSummary",
    "SqliteTraceStore",
    "TraceEvent",
    "TraceStore",
    "default_store_url",
    "export_jsonl",
    "import_jsonl",
    "iter_jsonl",
    "open_trace_store",
    "resolve_run_id",
]
