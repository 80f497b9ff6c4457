"""The bench's one-caller durable call on SQLite files of two page sizes, alternated in one process.

    python scripts/page_size_ab.py                         # 4,096 against 2,048 bytes, 20 rounds of 100
    python scripts/page_size_ab.py --b 1024 --rounds 30

Two ``Runtime``s, each on its own file in one directory under ``/tmp`` (a real disk), the file of
``--b`` made with that page size before the runtime first opens it (a page size is a file's own,
chosen before its first table), the other with SQLite's default. Each runs the bench's ``put``
tool (``effect="write"``), every call timed right after one raw fsync'd insert into a third file
(the bench's ``_raw_commit``), as ``bench/_durable.py`` times its one-caller row. The two run in
rounds of one block each, their order turned every round, after ``--warm`` calls each. Printed:
wall and thread-CPU medians over every call, the raw insert's, and in how many rounds the second
file's block median was lower.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from actionspace.bench._durable import _raw_commit
from actionspace.runtime import Runtime
from actionspace.types import ToolCall

_SCHEMA: Final = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}


def _runtime(path: Path, page_size: int | None) -> tuple[Runtime, str]:
    if page_size is not None:
        db = sqlite3.connect(path)
        db.execute(f"PRAGMA page_size = {int(page_size)}")
        db.execute("VACUUM")  # an empty file: the page size is now its own
        db.close()
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)
    rt.add_tool(name="put", input_schema=_SCHEMA, fn=lambda key, value: 3, effect="write", blocking=False)
    return rt, rt.new_run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", type=int, default=None, help="the first file's page size (SQLite's default)")
    parser.add_argument("--b", type=int, default=2048, help="the second file's page size")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--warm", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="actionspace-pages-", dir="/tmp") as tmp:
        runs = {
            name: _runtime(Path(tmp) / f"{name}.db", size) for name, size in (("A", args.a), ("B", args.b))
        }
        raw_db, raw = _raw_commit(Path(tmp) / "raw.db")
        calls = [ToolCall(name="put", arguments={"key": f"k{i}", "value": i}) for i in range(1000)]
        n = 0

        def one(name: str) -> tuple[int, int, int, int]:
            nonlocal n
            n += 1
            rt, run = runs[name]
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            raw(n)
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            out: Any = rt.call(calls[n % len(calls)], run_id=run, node_id=f"n{n}")
            t2, c2 = time.perf_counter_ns(), time.thread_time_ns()
            if (out.status, out.data) != ("ok", 3):
                raise AssertionError(f"the call returned {out!r}")
            return t1 - t0, c1 - c0, t2 - t1, c2 - c1

        for _ in range(args.warm):
            one("A")
            one("B")
        got: dict[str, list[tuple[int, int, int, int]]] = {"A": [], "B": []}
        blocks: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for r in range(args.rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                block = [one(name) for _ in range(args.block)]
                got[name].extend(block)
                blocks[name].append(
                    (statistics.median(b[2] for b in block), statistics.median(b[3] for b in block))
                )
        for rt, _run in runs.values():
            rt.close()
        raw_db.close()
    for name, size in (("A", args.a or 4096), ("B", args.b)):
        rows = got[name]
        med = [statistics.median(r[k] for r in rows) / 1e3 for k in range(4)]
        print(
            f"{name} ({size:>5} B pages): call wall {med[2]:6.1f} cpu {med[3]:6.1f} µs;"
            f" raw insert beside {med[0]:6.1f} / {med[1]:5.1f}; {med[0] / med[2]:.1%} of the raw rate"
        )
    lw = sum(b[0] < a[0] for a, b in zip(blocks["A"], blocks["B"], strict=True))
    lc = sum(b[1] < a[1] for a, b in zip(blocks["A"], blocks["B"], strict=True))
    dw = statistics.median(b[0] - a[0] for a, b in zip(blocks["A"], blocks["B"], strict=True)) / 1e3
    dc = statistics.median(b[1] - a[1] for a, b in zip(blocks["A"], blocks["B"], strict=True)) / 1e3
    print(f"B - A by block: wall {dw:+.1f} µs (B lower in {lw}/{args.rounds}), cpu {dc:+.1f} µs ({lc})")


if __name__ == "__main__":
    main()
