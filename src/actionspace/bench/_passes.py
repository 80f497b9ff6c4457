"""Fresh-process passes: each group of rows runs in its own interpreter, once per pass.

A group is the floors, actionspace, or one peer framework. Running each in a new process keeps one
framework's imports, heap and background threads from taxing another's figures, and a peer that
crashes its interpreter costs only its own rows. The parent aggregates the median of the pass medians.
How the processes are made is in :mod:`actionspace.bench._worker`.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from actionspace.bench._timing import Pass
from actionspace.bench._workload import SLOW_S

__all__ = ["GROUPS", "WORKER_TIMEOUT_S", "aggregate", "run_group", "run_passes"]

GROUPS: dict[str, tuple[str, ...]] = {
    "floors": ("direct.", "pydantic_validate.", "json_parse.", "sqlite_commit."),
    "actionspace": ("actionspace.",),
    "mcp": ("mcp.",),
    "pydantic_ai": ("pydantic_ai.",),
    "langgraph": ("langgraph.",),
    "openai_agents": ("openai_agents.",),
    "plan": ("plan.", "dag."),
    "trim": ("trim.",),
    "discovery": ("discovery.",),
    "adapters": ("actionspace.adapter.",),
    "paired": ("paired.",),
}
"""Group → the prefixes of the rows it measures (its batch rows are the same under ``batch.``)."""

WORKER_TIMEOUT_S = 900.0
"""A group's process is killed after this many seconds (scaled by ``max(1, scale)``)."""

_IMPORT_TIMEOUT_S = 300.0
"""A group's process that has not finished importing after this long is given up on."""

_WORKER = "actionspace.bench._worker"

Progress = Callable[[str], None]


def _empty(group: str) -> dict[str, Any]:
    return {"percall": {}, "batch": {}, "skipped": {}, "errors": {}, "extra": {}, "elapsed_s": {group: 0.0}}


def _timeout(scale: float) -> float:
    return WORKER_TIMEOUT_S * max(1.0, scale)


def _collect(
    group: str, status: int | None, out: Path, tail: Sequence[str], started: float
) -> dict[str, Any]:
    """The rows a pass wrote, or an error entry naming how its process ended."""
    result = _empty(group)
    if status == 0 and out.exists():
        result = json.loads(out.read_text())
    else:
        if status is None:
            why = "lost its server"
        elif status == -signal.SIGALRM or status == -signal.SIGKILL:
            why = "timed out"
        else:
            why = f"exited with status {status}"
        result["errors"][group] = f"the {group} process {why}: {' | '.join(tail[-5:])}"[:600]
    result["elapsed_s"] = {group: round(time.perf_counter() - started, 2)}
    return result


def _forward(stream: IO[str], say: Progress, tail: list[str]) -> None:
    for line in stream:
        text = line.rstrip()
        if text:
            say(text)
            tail.append(text)
            del tail[:-20]


def run_group(
    group: str, scale: float, only: Sequence[str], progress: Progress | None = None, loop: str = "once"
) -> dict[str, Any]:
    """One pass of one group in a newly spawned interpreter; a crash or a timeout becomes an error entry."""
    say = progress or (lambda _line: None)
    with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as tmp:
        out = Path(tmp) / "pass.json"
        cmd = [sys.executable, "-m", _WORKER, group, "--out", str(out), "--scale", repr(scale)]
        cmd += ["--loop", loop]
        for prefix in only:
            cmd += ["--only", prefix]
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        tail: list[str] = []
        reader = threading.Thread(target=_forward, args=(proc.stdout, say, tail), daemon=True)
        reader.start()
        status: int | None
        try:
            status = proc.wait(timeout=_timeout(scale))
        except subprocess.TimeoutExpired:
            proc.kill()
            status = proc.wait()
        reader.join(timeout=5)
        return _collect(group, status, out, tail, started)


class _Server:
    """A process that imported one group once and forks a fresh child per pass (Linux)."""

    def __init__(self, group: str, progress: Progress) -> None:
        self.group = group
        self.proc = subprocess.Popen(
            [sys.executable, "-m", _WORKER, group, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        self.tail: list[str] = []
        self._reader = threading.Thread(
            target=_forward, args=(self.proc.stderr, progress, self.tail), daemon=True
        )
        self._reader.start()

    def _answer(self, timeout: float) -> dict[str, Any] | None:
        with selectors.DefaultSelector() as waiting:  # poll/epoll: select() refuses descriptors >= 1024
            waiting.register(self.stdout, selectors.EVENT_READ)
            ready = waiting.select(timeout)
        line = self.stdout.readline() if ready else ""
        return json.loads(line) if line.strip() else None

    def ready(self) -> dict[str, Any] | None:
        """The ready line (with ``import_s``), or None if the server died or hung while importing."""
        return self._answer(_IMPORT_TIMEOUT_S)

    def run(self, scale: float, only: Sequence[str], loop: str = "once") -> dict[str, Any]:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="actionspace-bench-") as tmp:
            out = Path(tmp) / "pass.json"
            request = {
                "out": str(out),
                "scale": scale,
                "only": list(only),
                "timeout_s": _timeout(scale),
                "loop": loop,
            }
            try:
                self.stdin.write(json.dumps(request) + "\n")
                self.stdin.flush()
                answer = self._answer(_timeout(scale) + 30)
            except (BrokenPipeError, OSError, ValueError):
                answer = None
            status = None if answer is None else int(answer["status"])
            return _collect(self.group, status, out, self.tail, started)

    def close(self) -> None:
        try:
            self.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def _selected(only: Sequence[str]) -> list[str]:
    probe = Pass(1.0, only)
    return [g for g, prefixes in GROUPS.items() if probe.wants_any(*prefixes)]


def _merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {
        "percall": {},
        "batch": {},
        "skipped": {},
        "errors": {},
        "extra": {},
        "elapsed_s": {},
    }
    for part in parts:
        for key in merged:
            merged[key].update(part.get(key, {}))
    return merged


def run_passes(
    passes: int, scale: float, only: Sequence[str], progress: Progress | None = None, loop: str = "once"
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``passes`` rounds over the selected groups, each pass of each group in a fresh process.

    Where ``os.fork`` is safe (Linux), each group's process imports once and forks a child per pass,
    all groups importing side by side before any timing starts; elsewhere every pass spawns a new
    interpreter. Rounds interleave the groups, so a change of machine load is shared among them.
    Returns one merged dict per pass, and how the processes were made (``mode``, ``import_s``).
    ``loop``: the event loop every row runs on (:data:`~actionspace.execution.loop.LOOPS`).
    """
    say = progress or (lambda _line: None)
    groups = _selected(only)
    if not sys.platform.startswith("linux"):
        out = []
        for n in range(passes):
            say(f"pass {n + 1}/{passes}")
            out.append(_merge([run_group(g, scale, only, progress, loop) for g in groups]))
        return out, {"mode": "spawn", "import_s": {}}
    say(f"importing {', '.join(groups)}")
    servers = {g: _Server(g, say) for g in groups}
    try:
        ready = {g: s.ready() for g, s in servers.items()}
        imports = {g: r["import_s"] for g, r in ready.items() if r is not None}
        out = []
        for n in range(passes):
            say(f"pass {n + 1}/{passes}")
            parts = []
            for group, server in servers.items():
                if ready[group] is None:
                    parts.append(_collect(group, None, Path(os.devnull), server.tail, time.perf_counter()))
                else:
                    parts.append(server.run(scale, only, loop))
            out.append(_merge(parts))
        return out, {"mode": "fork", "import_s": imports}
    finally:
        for server in servers.values():
            server.close()


_PROCESSOR_FIGURES = ("cpu_us", "cores_busy")
"""What a row may say of the processor besides its times (:mod:`actionspace.bench._durable`)."""


def aggregate(passes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per row: the median of the pass medians (and of the pass p99s); errors listed per pass."""
    percall: dict[str, dict[str, Any]] = {}
    for name in sorted({k for p in passes for k in p["percall"]}):
        rows = [p["percall"][name] for p in passes if name in p["percall"]]
        percall[name] = {
            "median_us": statistics.median(r["median_us"] for r in rows),
            "p99_us": statistics.median(r["p99_us"] for r in rows),
            "min_us": min(r["min_us"] for r in rows),
            "calls_per_sample": rows[0]["calls_per_sample"],
            "n_per_pass": rows[0]["n"],
            "passes": len(rows),
            "pass_medians_us": [round(r["median_us"], 3) for r in rows],
            "result": rows[0]["result"],
        }
        for figure in _PROCESSOR_FIGURES:  # a durable row's CPU time, where every pass measured it
            if all(figure in r for r in rows):
                percall[name][figure] = statistics.median(r[figure] for r in rows)
    batch: dict[str, dict[str, Any]] = {}
    for name in sorted({k for p in passes for k in p["batch"]}):
        rows = [p["batch"][name] for p in passes if name in p["batch"]]
        median = statistics.median(r["median_ms"] for r in rows)
        batch[name] = {
            "median_ms": median,
            "min_ms": min(r["min_ms"] for r in rows),
            "max_ms": max(r["max_ms"] for r in rows),
            "ideal_ms": SLOW_S * 1e3,
            "overhead_ms": median - SLOW_S * 1e3,
            "reps_per_pass": rows[0]["reps"],
            "passes": len(rows),
            "pass_medians_ms": [round(r["median_ms"], 3) for r in rows],
        }
    errors: dict[str, list[str]] = {}
    skipped: dict[str, str] = {}
    for i, p in enumerate(passes):
        for name, message in p["errors"].items():
            errors.setdefault(name, []).append(f"pass {i + 1}: {message}")
        skipped.update(p["skipped"])
    elapsed = [dict(p["elapsed_s"]) for p in passes]
    return {
        "percall": percall,
        "batch": batch,
        "errors": errors,
        "skipped": skipped,
        "pass_elapsed_s": elapsed,
        "extra": [dict(p.get("extra", {})) for p in passes],
    }
