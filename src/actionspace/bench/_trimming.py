"""Trimming rows: a generated log of 1 GiB (64 MiB in a quick run) streamed through ``log-v1``.

The log is made lazily, one chunk of about 1 MiB at a time, and handed to :func:`shape` as an
iterator: nothing ever holds the whole text. Most lines are ordinary service output; one line in 64
names a keyword without being an error (``0 errors, 0 failures``), so the rule's candidate check runs
too; a Python traceback sits halfway through, so the first half is searched and the second half only
counted, as it is for a real failing build.

Peak memory is the growth of the process's resident set while the log is trimmed: peak RSS
(``ru_maxrss``) after the run minus current RSS (``/proc/self/statm``) before it, in the pass's own
fresh process. Unlike a ``tracemalloc`` peak it counts every byte the process really holds (C
buffers, regex state, allocator slack) and costs nothing while timing, so the throughput comes from
the same run. It can only over-count: a peak reached before the run (importing) shows as growth.
"""

from __future__ import annotations

import gc
import os
import resource
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any, Final

from actionspace.bench._timing import Pass

__all__ = [
    "CHUNK_BYTES",
    "MEMORY_LIMIT_BYTES",
    "MIN_LOG_BYTES",
    "ROW",
    "TRACEBACK",
    "log_bytes",
    "log_chunks",
    "measure_trim",
    "run_trim_rows",
    "summarize_trim",
]

ROW: Final = "trim.log_v1"
"""The row's name (``--only trim`` selects it)."""

LOG_BYTES: Final = 1 << 30
"""Size of the generated log at scale 1, in bytes (1 GiB)."""

MIN_LOG_BYTES: Final = 64 << 20
"""The smallest log, in bytes (64 MiB): what ``--quick`` (scale 0.05) trims."""

CHUNK_BYTES: Final = 1 << 20
"""Roughly how many bytes each chunk of the generator holds (whole lines, 1 MiB)."""

MEMORY_LIMIT_BYTES: Final = 64 << 20
"""Target: the resident set grows by at most this much while 1 GiB is trimmed (64 MiB)."""

_LINES: Final = (
    "2026-05-01T12:00:00.123Z INFO  worker-3 request handled path=/api/v1/items status=200 in 12ms\n",
    "2026-05-01T12:00:00.125Z DEBUG db pool checkout conn=17 wait_us=41 idle=5\n",
    "2026-05-01T12:00:00.131Z WARN  cache miss ratio above 0.4 key=user:8812 (refreshing)\n",
    "2026-05-01T12:00:00.137Z INFO  worker-1 request handled path=/api/v1/orders status=201 in 31ms\n",
)
_NEAR_MISS: Final = "2026-05-01T12:00:00.140Z INFO  batch summary: 0 errors, 0 failures, 118 items in 9ms\n"
_NEAR_MISS_EVERY: Final = 64

TRACEBACK: Final = (
    b"2026-05-01T12:00:01.002Z ERROR worker-2 unhandled exception in request handler\n"
    b"Traceback (most recent call last):\n"
    b'  File "service/handlers.py", line 88, in handle\n'
    b"    rows = fetch(query)\n"
    b"MemoryError: cannot allocate 4096 bytes\n"
)
"""The one error record of the log, placed halfway through."""


def log_bytes(scale: float) -> int:
    """Bytes of the log at ``scale``: ``scale`` GiB, at least 64 MiB."""
    return max(MIN_LOG_BYTES, int(LOG_BYTES * scale))


def _block(size: int) -> bytes:
    lines = []
    total = 0
    n = 0
    while total < size:
        line = _NEAR_MISS if n % _NEAR_MISS_EVERY == _NEAR_MISS_EVERY - 1 else _LINES[n % len(_LINES)]
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines).encode()


def log_chunks(total: int, *, chunk: int = CHUNK_BYTES, error_at: float = 0.5) -> Iterator[bytes]:
    """Exactly ``total`` bytes of log, in chunks of about ``chunk`` bytes, made as they are read.

    :data:`TRACEBACK` comes as its own chunk at the last line break before ``error_at × total``
    bytes (if it still fits there); the last chunk is cut to size, so the log may end mid-line.
    Raises ValueError on a negative ``total`` or a non-positive ``chunk``.
    """
    if total < 0 or chunk < 1:
        raise ValueError(f"total must be >= 0 and chunk >= 1, got {total} and {chunk}")
    block = _block(chunk)
    sent = 0
    error_due = int(total * error_at)
    placed = False
    while sent < total:
        if not placed and sent >= error_due and total - sent >= len(TRACEBACK):
            placed = True
            sent += len(TRACEBACK)
            yield TRACEBACK
            continue
        piece = block if total - sent >= len(block) else block[: total - sent]
        if not placed and sent < error_due < sent + len(piece):
            # End this chunk at the last line break before the traceback is due, so it starts a line.
            cut = piece.rfind(b"\n", 0, error_due - sent) + 1
            error_due = sent + cut
            if not cut:
                continue
            piece = piece[:cut]
        sent += len(piece)
        yield piece


def _rss_now() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def measure_trim(total: int) -> dict[str, Any]:
    """Shape ``total`` bytes of generated log with ``log-v1``; time it and the growth of RSS.

    Returns ``bytes``, ``seconds``, ``mib_per_s``, ``peak_rss_growth_bytes``, ``rss_method`` and what
    the rule kept (``total_lines``, ``first_error_line``, ``kept_bytes``). Raises AssertionError when
    the rule did not see every byte or missed the traceback: a figure from a wrong run is no figure.
    """
    from actionspace.observation import shape

    gc.collect()
    before = _rss_now()
    method = "ru_maxrss after − statm RSS before"
    if before is None:
        before, method = _peak_rss(), "ru_maxrss after − ru_maxrss before (may under-count)"
    started = time.perf_counter()
    shaped = shape(log_chunks(total), rule="log-v1")
    seconds = time.perf_counter() - started
    growth = max(0, _peak_rss() - before)
    trimming = shaped.trimming
    if trimming is None or trimming.original_bytes != total:
        seen = None if trimming is None else trimming.original_bytes
        raise AssertionError(f"log-v1 saw {seen} bytes of {total}")
    if "Traceback (most recent call last):" not in shaped.data["first_error"]:
        raise AssertionError(f"log-v1 missed the traceback: {shaped.data['first_error']!r}"[:300])
    return {
        "bytes": total,
        "seconds": seconds,
        "mib_per_s": total / seconds / (1 << 20),
        "peak_rss_growth_bytes": growth,
        "rss_method": method,
        "total_lines": shaped.data["total_lines"],
        "first_error_line": shaped.data["first_error_line"],
        "kept_bytes": trimming.kept_bytes,
    }


def run_trim_rows(p: Pass) -> None:
    """The trimming row of one pass (in the pass's own process, so RSS is this run's alone)."""
    if not p.want(ROW):
        return
    total = log_bytes(p.scale)
    try:
        row = measure_trim(total)
    except Exception as exc:
        p.fail(ROW, exc)
        return
    p.record(
        ROW,
        row,
        f"{total / (1 << 20):,.0f} MiB at {row['mib_per_s']:.1f} MiB/s, "
        f"RSS +{row['peak_rss_growth_bytes'] / (1 << 20):.1f} MiB",
    )


def summarize_trim(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Across passes: the median throughput and the largest RSS growth (the limit is on the worst)."""
    if not rows:
        return None
    growth = max(r["peak_rss_growth_bytes"] for r in rows)
    return {
        "bytes": rows[0]["bytes"],
        "passes": len(rows),
        "mib_per_s": statistics.median(r["mib_per_s"] for r in rows),
        "pass_mib_per_s": [round(r["mib_per_s"], 1) for r in rows],
        "peak_rss_growth_mib": growth / (1 << 20),
        "pass_rss_growth_mib": [round(r["peak_rss_growth_bytes"] / (1 << 20), 2) for r in rows],
        "rss_method": rows[0]["rss_method"],
        "limit_mib": MEMORY_LIMIT_BYTES / (1 << 20),
        "status": "PASS" if growth <= MEMORY_LIMIT_BYTES else "FAIL",
        "total_lines": rows[0]["total_lines"],
        "first_error_line": rows[0]["first_error_line"],
    }
