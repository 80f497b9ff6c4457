"""Instructions per call of one path, counted by valgrind's callgrind (they do not move with the
machine's load, unlike wall-clock figures).

    python scripts/instructions.py acall-async      # rt.acall of add_async, memory store
    python scripts/instructions.py acall-sync       # rt.acall of add (a sync tool, awaited)
    python scripts/instructions.py openai-async     # OpenAI Agents' on_invoke_tool of add_async
    python scripts/instructions.py dag-node         # one node of the zero-latency 1,000-node DAG
    python scripts/instructions.py dag-tasks        # the same DAG as bare asyncio tasks, per node
    python scripts/instructions.py batch-node       # one node of the 100 x sleep(10 ms) plan
    python scripts/instructions.py gather-node      # asyncio.gather of the same 100 sleeps, per call
    python scripts/instructions.py durable-call     # rt.call of a write tool on a SQLite file
    python scripts/instructions.py session-chat     # a session turn (s.ahandle), Chat Completions form
    python scripts/instructions.py session-anthropic  # the same turn as an Anthropic message
    python scripts/instructions.py session-responses  # the same turn as Responses items

Each path runs twice under callgrind, with a small and a large count; the difference divided by
the extra calls cancels start-up and imports. Needs ``valgrind`` (Debian: ``apt-get install
valgrind``); about two minutes per path.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import Any

PATHS = (
    "acall-async",
    "acall-sync",
    "openai-async",
    "dag-node",
    "dag-tasks",
    "batch-node",
    "gather-node",
    "durable-call",
    "session-chat",
    "session-anthropic",
    "session-responses",
)
COUNTS = {
    "dag-node": (1, 3),
    "dag-tasks": (1, 3),
    "batch-node": (5, 15),
    "gather-node": (5, 15),
    "durable-call": (500, 1500),
    "default": (2000, 6000),
}
"""(small, large) repetitions; a DAG repetition is a whole 1,000-node plan, a batch one 100 calls."""
NODES = {"dag-node": 1000, "dag-tasks": 1000, "batch-node": 100, "gather-node": 100}


def _acall(tool: str) -> Callable[[int], Awaitable[Any]]:
    from actionspace import Runtime
    from actionspace.bench._workload import add, add_async, openai_calls

    rt = Runtime("memory://")
    rt.tool(effect="none")(add)
    rt.tool(effect="none")(add_async)
    calls = openai_calls(tool)
    return lambda i: rt.acall(calls[i % len(calls)])


def _openai() -> Callable[[int], Awaitable[Any]]:
    from agents import function_tool
    from agents.tool_context import ToolContext

    from actionspace.bench._workload import ARGS_JSON, add_async

    tool = function_tool(add_async)

    def invoke(i: int) -> Awaitable[Any]:
        args = ARGS_JSON[i % len(ARGS_JSON)]
        ctx = ToolContext(context=None, tool_name=tool.name, tool_call_id=f"call_{i}", tool_arguments=args)
        return tool.on_invoke_tool(ctx, args)

    return invoke


def _dag() -> Callable[[int], Awaitable[Any]]:
    from actionspace.bench._parallel import _runtime, dag_plan, random_dag

    rt = _runtime("memory://")
    plan = dag_plan(random_dag(), zero=True)
    run = rt.new_run()
    return lambda _i: rt.arun_plan(plan, run_id=run)


def _dag_tasks() -> Callable[[int], Awaitable[Any]]:
    from actionspace.bench._parallel import asyncio_dag, random_dag

    dag = random_dag()
    return lambda _i: asyncio_dag(dag, zero=True)


def _batch() -> Callable[[int], Awaitable[Any]]:
    from actionspace.bench._parallel import _runtime, batch_plan

    rt = _runtime("memory://")
    plan = batch_plan()
    run = rt.new_run()
    return lambda _i: rt.arun_plan(plan, run_id=run)


def _gather() -> Callable[[int], Awaitable[Any]]:
    from actionspace.bench._workload import BATCH, slow

    async def batch(_i: int) -> Any:
        return await asyncio.gather(*(slow(i) for i in range(BATCH)))

    return batch


def _session(provider: str) -> Callable[[int], Awaitable[Any]]:
    """The bench's session row in ``provider``'s form (``actionspace.session.ahandle.async_tool``)."""
    from actionspace.bench._ours import _turns

    rt = _runtime_add()
    s = rt.session(provider=provider)  # type: ignore[arg-type]
    s.user("add two numbers")
    turns = _turns(provider)
    return lambda i: s.ahandle(turns[i % len(turns)])


def _runtime_add() -> Any:
    from actionspace import Runtime
    from actionspace.bench._workload import add_async

    rt = Runtime("memory://")
    rt.tool(effect="none")(add_async)
    return rt


def _durable() -> Callable[[int], Any]:
    """The bench's durable row without its raw-insert twin: ``rt.call`` of a ``write`` tool on a
    SQLite file (the intent fsync'd, the outcome and the deferred trace written). Counts what the
    calling process executes in user space: the wait for the disk is not an instruction."""
    import tempfile
    from pathlib import Path

    from actionspace import Runtime, ToolCall

    home = Path(tempfile.mkdtemp(prefix="actionspace-instructions-"))
    rt = Runtime(f"sqlite:///{home / 'actionspace.db'}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    run = rt.new_run()

    def call(i: int) -> Any:
        put_call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
        return rt.call(put_call, run_id=run, node_id=f"n{i}")

    return call


def _run(path: str, n: int) -> None:
    """The child: ``n`` calls of ``path``."""
    if path == "durable-call":
        call = _durable()
        for i in range(n):
            call(i)
        return
    make = {
        "acall-async": lambda: _acall("add_async"),
        "acall-sync": lambda: _acall("add"),
        "openai-async": _openai,
        "dag-node": _dag,
        "dag-tasks": _dag_tasks,
        "batch-node": _batch,
        "gather-node": _gather,
        "session-chat": lambda: _session("openai_chat"),
        "session-anthropic": lambda: _session("anthropic"),
        "session-responses": lambda: _session("openai_responses"),
    }[path]

    async def main() -> None:
        call = make()
        for i in range(n):
            await call(i)

    asyncio.run(main())


def _instructions(path: str, n: int) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            path,
            str(n),
        ],
        capture_output=True,
        text=True,
        check=True,
        # numpy's OpenBLAS thread spins under valgrind while a plan sleeps: not the path measured
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1"},
    )
    match = re.search(r"Collected : (\d+)", out.stderr)
    if match is None:
        raise SystemExit(f"callgrind printed no count:\n{out.stderr[-2000:]}")
    return int(match.group(1))


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        _run(argv[1], int(argv[2]))
        return
    if len(argv) != 1 or argv[0] not in PATHS:
        raise SystemExit(f"usage: python scripts/instructions.py {{{','.join(PATHS)}}}")
    path = argv[0]
    small, large = COUNTS.get(path, COUNTS["default"])
    per = (_instructions(path, large) - _instructions(path, small)) / (large - small)
    nodes = NODES.get(path, 1)
    unit = "per node" if "node" in path or path == "dag-tasks" else "per call"
    print(f"{path}: {per / nodes:,.0f} instructions {unit}")


if __name__ == "__main__":
    main(sys.argv[1:])
