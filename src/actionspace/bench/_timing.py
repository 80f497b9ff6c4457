"""Timing core: every call timed on its own with ``perf_counter_ns``, after a warm-up and a full GC.

The garbage collector stays enabled while timing, as it is in production: its pauses land in the
p99, not in a separate figure. One :class:`Pass` collects the rows measured in one process.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from actionspace.bench._workload import BATCH, SLOW_S

__all__ = [
    "Pass",
    "matches",
    "summarize",
    "time_async",
    "time_batch",
    "time_sync",
    "timed_async",
    "warmup_count",
]

SyncFn = Callable[[int], Any]
AsyncFn = Callable[[int], Awaitable[Any]]
Extract = Callable[[Any], Any]


def warmup_count(n: int) -> int:
    """Untimed calls before a timed run of ``n``: a tenth, at least 50 and at most 1000."""
    return max(50, min(1000, n // 10))


def time_sync(fn: SyncFn, n: int) -> list[int]:
    """Nanoseconds of each of ``n`` calls ``fn(i)``, after the warm-up."""
    for i in range(warmup_count(n)):
        fn(i)
    gc.collect()
    clock = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = clock()
        fn(i)
        out[i] = clock() - t0
    return out


async def time_async(afn: AsyncFn, n: int) -> list[int]:
    """Nanoseconds of each of ``n`` awaited calls ``afn(i)``, after the warm-up."""
    for i in range(warmup_count(n)):
        await afn(i)
    gc.collect()
    return await timed_async(afn, n)


async def timed_async(afn: AsyncFn, n: int) -> list[int]:
    """Nanoseconds of each of ``n`` awaited calls ``afn(i)``, without a warm-up."""
    clock = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = clock()
        await afn(i)
        out[i] = clock() - t0
    return out


def summarize(samples_ns: Sequence[int], calls_per_sample: int = 1) -> dict[str, Any]:
    """Median, p99, mean and min of samples, in microseconds (p99: the sample at rank 0.99·n)."""
    s = sorted(samples_ns)
    n = len(s)
    return {
        "n": n,
        "calls_per_sample": calls_per_sample,
        "median_us": s[n // 2] / 1e3,
        "p99_us": s[min(n - 1, int(0.99 * n))] / 1e3,
        "mean_us": sum(s) / n / 1e3,
        "min_us": s[0] / 1e3,
    }


async def time_batch(afn: Callable[[], Awaitable[Sequence[Any]]], reps: int) -> dict[str, Any]:
    """Wall time of ``reps`` batches; ``afn`` issues ``BATCH`` slow calls at once and returns them all."""
    return (await time_batches([afn], reps))[0]


async def time_batches(
    afns: Sequence[Callable[[], Awaitable[Sequence[Any]]]], reps: int
) -> list[dict[str, Any]]:
    """:func:`time_batch` of each of ``afns``, their batches alternated (one of each in turn), so
    that a change of the machine's load between them is shared."""
    for afn in afns:
        first = await afn()
        if len(first) != BATCH:
            raise AssertionError(f"a batch returned {len(first)} results, expected {BATCH}")
    gc.collect()
    clock = time.perf_counter_ns
    walls: list[list[int]] = [[] for _ in afns]
    for _ in range(reps):
        for afn, out in zip(afns, walls, strict=True):
            t0 = clock()
            await afn()
            out.append(clock() - t0)
    summaries = []
    for out in walls:
        s = sorted(out)
        summaries.append(
            {
                "reps": reps,
                "median_ms": s[len(s) // 2] / 1e6,
                "min_ms": s[0] / 1e6,
                "max_ms": s[-1] / 1e6,
                "ideal_ms": SLOW_S * 1e3,
            }
        )
    return summaries


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


def matches(name: str, only: Sequence[str]) -> bool:
    """True when no prefix is given, or ``name`` (or ``name`` without ``batch.``) starts with one."""
    if not only:
        return True
    bare = name.removeprefix("batch.")
    return any(name.startswith(p) or bare.startswith(p) for p in only)


class Pass:
    """The rows measured in one process: per-call summaries, batch summaries, skips and errors.

    ``scale`` multiplies call counts (at least 200 timed calls and 5 batches per row); ``only``
    keeps the rows whose name starts with one of the prefixes (``batch.`` is ignored when matching).
    A row that raises or returns the wrong value is recorded in ``errors`` and the pass goes on.
    """

    def __init__(
        self, scale: float, only: Sequence[str], *, log: Callable[[str], None] | None = None
    ) -> None:
        self.scale = scale
        self.only = list(only)
        self.percall: dict[str, dict[str, Any]] = {}
        self.batch: dict[str, dict[str, Any]] = {}
        self.skipped: dict[str, str] = {}
        self.errors: dict[str, str] = {}
        self.extra: dict[str, dict[str, Any]] = {}
        """Rows of another shape (the plan DAG, trimming): name → figures, summarized by their module."""
        self._log = log or _stderr

    def want(self, name: str) -> bool:
        return matches(name, self.only)

    def wants_any(self, *prefixes: str) -> bool:
        """True when some selected row may start with one of ``prefixes``."""
        if not self.only:
            return True
        return any(
            matches(p, self.only)
            or matches(f"batch.{p}", self.only)
            or any(o.removeprefix("batch.").startswith(p) for o in self.only)
            for p in prefixes
        )

    def calls(self, base: int) -> int:
        return max(200, int(base * self.scale))

    def reps(self, base: int) -> int:
        return max(5, int(base * min(1.0, self.scale * 2)))

    def sync(self, name: str, fn: SyncFn, base: int, *, extract: Extract, expect: Any) -> None:
        """Time ``fn(i)``; ``extract(fn(0))`` must equal ``expect`` first."""
        if not self.want(name):
            return
        try:
            got = extract(fn(0))
            self._check(name, got, expect)
            row = summarize(time_sync(fn, self.calls(base)))
        except Exception as exc:
            self.errors[name] = _describe(exc)
        else:
            self.percall[name] = {**row, "result": got}
        self._report(name)

    async def aio(self, name: str, afn: AsyncFn, base: int, *, extract: Extract, expect: Any) -> None:
        """Time ``await afn(i)``; ``extract(await afn(0))`` must equal ``expect`` first."""
        if not self.want(name):
            return
        try:
            got = extract(await afn(0))
            self._check(name, got, expect)
            row = summarize(await time_async(afn, self.calls(base)))
        except Exception as exc:
            self.errors[name] = _describe(exc)
        else:
            self.percall[name] = {**row, "result": got}
        self._report(name)

    async def abatch(
        self, name: str, afn: Callable[[], Awaitable[Sequence[Any]]], base_reps: int = 30
    ) -> None:
        """Time ``await afn()``, which issues one batch of ``BATCH`` slow calls."""
        if not self.want(name):
            return
        try:
            self.batch[name] = await time_batch(afn, self.reps(base_reps))
        except Exception as exc:
            self.errors[name] = _describe(exc)
        self._report(name)

    async def abatch_beside(
        self,
        name: str,
        afn: Callable[[], Awaitable[Sequence[Any]]],
        beside: str,
        floor: Callable[[], Awaitable[Sequence[Any]]],
        base_reps: int = 30,
    ) -> None:
        """:meth:`abatch` of ``afn``, with the batches of ``floor`` timed alternately with its own
        and recorded as row ``beside``."""
        if not self.want(name):
            return
        try:
            self.batch[name], self.batch[beside] = await time_batches([afn, floor], self.reps(base_reps))
        except Exception as exc:
            self.errors[name] = _describe(exc)
        else:
            self._report(beside)
        self._report(name)

    def skip(self, prefix: str, reason: str) -> None:
        """Rows starting with ``prefix`` cannot run here (a package is missing, or too old)."""
        self.skipped[prefix] = reason
        self._log(f"[{prefix}] skipped: {reason}")

    def fail(self, prefix: str, exc: BaseException) -> None:
        """Setting up the rows starting with ``prefix`` failed."""
        self.errors[prefix] = _describe(exc)
        self._log(f"[{prefix}] error: {self.errors[prefix]}")

    def record(self, name: str, row: dict[str, Any], figure: str) -> None:
        """Keep ``row`` under ``extra[name]`` and log ``figure`` as its progress line."""
        self.extra[name] = row
        self._log(f"[{name}] {figure}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "percall": self.percall,
            "batch": self.batch,
            "skipped": self.skipped,
            "errors": self.errors,
            "extra": self.extra,
        }

    @staticmethod
    def _check(name: str, got: Any, expect: Any) -> None:
        if got != expect:
            raise AssertionError(f"{name} returned {got!r}, expected {expect!r}")

    def _report(self, name: str) -> None:
        if name in self.errors:
            self._log(f"[{name}] error: {self.errors[name]}")
            return
        row = self.percall.get(name) or self.batch.get(name) or {}
        figure = (
            f"median {row['median_us']:.2f} µs" if "median_us" in row else f"median {row['median_ms']:.2f} ms"
        )
        self._log(f"[{name}] {figure}")


def _stderr(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)
