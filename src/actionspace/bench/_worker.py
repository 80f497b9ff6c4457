"""Processes that measure one group of rows; started by :mod:`actionspace.bench._passes`.

Two modes:

- ``python -m actionspace.bench._worker GROUP --out FILE [--scale F] [--only P]``: measure once in
  this process, write the rows to FILE (JSON).
- ``python -m actionspace.bench._worker GROUP --serve``: import the group's modules once, print a
  ready line, then for each request line on stdin fork a child that measures one pass (a fresh
  process whose state is exactly "just imported") and answer one status line on stdout. Imports of
  the big frameworks take seconds; paying them once per group instead of once per pass keeps a quick
  run quick. Should importing have started a thread, a pass runs in a spawned interpreter instead,
  since forking a threaded process is unsafe.

Progress lines go to stderr; stdout carries only the protocol lines.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actionspace.bench._passes import GROUPS
from actionspace.bench._timing import Pass
from actionspace.execution.loop import LOOPS, OnceRoundedPolicy

__all__ = ["main", "measure", "preload"]


def measure(group: str, p: Pass) -> None:
    """Measure one group's rows into ``p``."""
    if group == "floors":
        from actionspace.bench._floors import run_floors

        run_floors(p)
    elif group == "actionspace":
        from actionspace.bench._ours import run_ours

        run_ours(p)
    elif group == "plan":
        from actionspace.bench._parallel import run_plan_rows

        run_plan_rows(p)
    elif group == "trim":
        from actionspace.bench._trimming import run_trim_rows

        run_trim_rows(p)
    elif group == "discovery":
        from actionspace.bench._discovery import run_discovery_rows

        run_discovery_rows(p)
    elif group == "adapters":
        from actionspace.bench._adapters import run_adapter_rows

        run_adapter_rows(p)
    elif group == "paired":
        from actionspace.bench._paired import run_paired

        run_paired(p)
    else:
        from actionspace.bench._peers import run_peer

        run_peer(p, group)


def preload(group: str) -> None:
    """Import what the group's rows use; a missing package is left for the pass to report."""
    names: tuple[str, ...]
    if group == "floors":
        names = ("actionspace.bench._floors",)
    elif group == "actionspace":
        names = ("actionspace.runtime", "actionspace.bench._ours")
    elif group == "plan":
        names = ("actionspace.runtime", "actionspace.plan", "actionspace.bench._parallel")
    elif group == "trim":
        names = ("actionspace.observation", "actionspace.bench._trimming")
    elif group == "discovery":
        names = ("actionspace.discovery", "bm25s", "actionspace.bench._discovery")
    elif group == "adapters":
        names = ("actionspace.runtime", "actionspace.bench._adapters")
    elif group == "paired":
        names = ("actionspace.runtime", "actionspace.bench._ours", "actionspace.bench._paired", "agents")
    else:
        from actionspace.bench._peers import MODULES

        names = ("actionspace.bench._peers", *MODULES[group])
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # ImportError, or a peer failing at import: the pass reports it
            continue


def _measure_to(group: str, scale: float, only: Sequence[str], out: Path, loop: str = "once") -> None:
    if loop == "once":  # every asyncio.run of the pass, peers' rows included, on this loop
        asyncio.set_event_loop_policy(OnceRoundedPolicy())
    p = Pass(scale, only)
    started = time.perf_counter()
    try:
        measure(group, p)
    except Exception as exc:  # keep the rows measured so far
        p.fail(group, exc)
    result = {**p.to_dict(), "elapsed_s": {group: round(time.perf_counter() - started, 2)}}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)


def _fork_pass(group: str, request: dict[str, Any]) -> int:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(2, 1)  # stdout is the protocol pipe: whatever the pass prints goes to stderr
            signal.alarm(max(1, int(request["timeout_s"])))  # the default action ends the child
            _measure_to(group, request["scale"], request["only"], Path(request["out"]), request["loop"])
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _spawn_pass(group: str, request: dict[str, Any]) -> int:
    cmd = [sys.executable, "-m", "actionspace.bench._worker", group, "--out", request["out"]]
    cmd += ["--scale", repr(request["scale"]), "--loop", request["loop"]]
    for prefix in request["only"]:
        cmd += ["--only", prefix]
    try:
        return subprocess.run(cmd, stdout=sys.stderr, timeout=request["timeout_s"]).returncode
    except subprocess.TimeoutExpired:
        return -int(signal.SIGALRM)


def _reply(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def serve(group: str) -> None:
    """Import once, then measure one pass per request line until stdin closes."""
    started = time.perf_counter()
    preload(group)
    _reply({"ready": True, "import_s": round(time.perf_counter() - started, 2)})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        forkable = threading.active_count() == 1
        status = _fork_pass(group, request) if forkable else _spawn_pass(group, request)
        _reply({"status": status, "mode": "fork" if forkable else "spawn"})


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m actionspace.bench._worker")
    ap.add_argument("group", choices=sorted(GROUPS))
    ap.add_argument("--serve", action="store_true", help="import once, fork one child per request line")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--loop", choices=LOOPS, default="once", help="the event loop the rows run on")
    args = ap.parse_args(argv)
    if args.serve:
        serve(args.group)
    elif args.out is None:
        ap.error("--out is required without --serve")
    else:
        _measure_to(args.group, args.scale, args.only, args.out, args.loop)


if __name__ == "__main__":
    main()
