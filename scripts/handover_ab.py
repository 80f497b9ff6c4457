"""What settling an interrupted handover costs a call that is not interrupted: other code's
``Executor`` and ``GroupCommit`` classes (``--old``: the ``src`` folder of, e.g., ``git archive`` of
an earlier commit; the rest of the runtime is this one) alternated with this code's, in blocks, on
one runtime and one writer.

    git archive HEAD src | tar -x -C /tmp/old && python scripts/handover_ab.py --old /tmp/old/src

For each of a sync ``rt.call`` of a blocking tool (``Executor._attempt``), a lone caller's
``GroupCommit.run`` (not durable) and ``GroupCommit.read_kept``: the opcodes the function executes
for one call under each class, then the median time a call of each over ``--blocks`` blocks of
``--calls`` calls, and in how many blocks the code in use was the faster.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from actionspace import Runtime
from actionspace.execution import executor as new_executor
from actionspace.ledger import sqlite_writer as new_writer
from actionspace.ledger.sqlite_writer import GroupCommit, SqliteConnections


def _load(src: str, module: str) -> ModuleType:
    path = Path(src, *module.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(f"old_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def _opcodes(owner: Any, cls: type, names: set[str], call: Callable[[], Any]) -> int:
    """Opcodes executed in the functions ``names`` during ``call()``, ``owner`` of class ``cls``."""
    owner.__class__ = cls
    seen = [0]

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            seen[0] += 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_name in names:
            frame.f_trace_opcodes = True
            return local
        return None

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return seen[0]


def _ab(
    what: str, owner: Any, old: type, new: type, names: set[str], call: Callable[[], Any], args: Any
) -> None:
    call()
    call()
    print(f"{what}: opcodes old {_opcodes(owner, old, names, call)} new {_opcodes(owner, new, names, call)}")
    times: dict[str, list[float]] = {"old": [], "new": []}
    for block in range(args.blocks):
        pair = [("old", old), ("new", new)]
        for name, cls in pair if block % 2 == 0 else pair[::-1]:
            owner.__class__ = cls
            began = time.perf_counter_ns()
            for _ in range(args.calls):
                call()
            times[name].append((time.perf_counter_ns() - began) / args.calls)
    owner.__class__ = new
    lower = sum(n < o for o, n in zip(times["old"], times["new"], strict=True))
    print(
        f"{what}: median ns a call old {statistics.median(times['old']):.0f}"
        f" new {statistics.median(times['new']):.0f}; new lower in {lower} of {args.blocks} blocks"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--old", required=True, help="the src folder of the code to compare with")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    old_executor = _load(args.old, "actionspace.execution.executor")
    old_writer = _load(args.old, "actionspace.ledger.sqlite_writer")

    rt = Runtime("memory://")

    def look(k: str) -> str:
        return k

    rt.add_tool(
        name="look",
        input_schema={"type": "object", "properties": {"k": {"type": "string"}}},
        fn=look,
        effect="read",
        timeout_s=5,
    )
    raw = {"name": "look", "arguments": {"k": "a"}}
    ex = rt.engine.executor
    _ab(
        "sync call, blocking tool",
        ex,
        old_executor.Executor,
        new_executor.Executor,
        {"_attempt"},
        lambda: rt.call(raw),
        args,
    )
    rt.close()

    folder = Path(tempfile.mkdtemp())
    db = SqliteConnections(folder / "w.db", synchronous="FULL", busy_timeout_s=10.0)
    db.init_schema(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)", "meta", "v", 1
    )  # WAL
    with db.write() as conn:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INT)")
    group = GroupCommit(db)
    readers = SqliteConnections(folder / "w.db", synchronous="NORMAL", busy_timeout_s=10.0)

    def write(conn: Any) -> None:
        conn.execute("INSERT OR REPLACE INTO t VALUES ('a', 1)")

    old_cls, new_cls = old_writer.GroupCommit, new_writer.GroupCommit
    _ab("GroupCommit.run", group, old_cls, new_cls, {"run"}, lambda: group.run(write, durable=False), args)
    read = "SELECT k, v FROM t WHERE k = ?"
    _ab(
        "GroupCommit.read_kept",
        group,
        old_cls,
        new_cls,
        {"read_kept"},
        lambda: group.read_kept(read, "a", readers),
        args,
    )
    readers.close()
    db.close()


if __name__ == "__main__":
    main()
