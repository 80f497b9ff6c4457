"""A new write from sync code (``Runtime.call`` of a ``ToolCall``) on the memory stores stays a
short chain of Python calls.

Most of what such a call costs outside the stores is the interpreter entering and leaving
functions, so their number is what is held here (load-independent, unlike a timing). Before: 167
calls a write, through the message's coroutine, the stages' preparation (``FastPath.ready``,
``ready_effect``), the engine's execution and the ledger driver's async generator, each stepped
through ``run_sync``; 87 once a plain new write runs in one frame of its own (pipeline/_write.py)
from its stages' events to its commit, the intent, the first send's moves and the commit written
out there, the key and the digest hashed from one canonical text, an ``int`` result put in its
envelope as the precompiled read path puts it.
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from types import FrameType
from typing import Any

from actionspace import Runtime, ToolCall

PACKAGE_DIR = "/actionspace/"
BUDGET = 36
"""Python-level calls into ``actionspace`` per ``rt.call`` of a new write on the memory stores
(the module docstring): 167 through the general path, 87 in the frame of pipeline/_write.py;
52 once the frame decides what it can per (run, tool) and writes out the rest (the arguments'
text without the RFC 8785 check's walk, the ``int`` result's ledger JSON made with its envelope,
the flow state shown it as the precompiled read path shows its own, no ``CallRecord`` unless the
protocol's functions take it, no error to note in the run's state); 47 once the committed entry
is set slot by slot (no ``LedgerEntry.evolve``), a plain value is known not to be awaitable
without ``inspect.isawaitable``, ``with in_flight`` runs its bodies without ``enter``/``leave``
and a call's plain records go to the store without ``Recorder.flush``; 43 once ``Messages.calls``
counts the call in flight without ``InFlight.enter``/``leave`` and the frame finds the run open
without ``Engine.run`` and ``RunRegistry.known``; 37 once the frame's admission reads the entry
once per ``EPOCH`` (no ``FastPath.entry``), its kept verdict without ``verdict_of``, and arguments of
a schema of typed properties without ``unfit_arguments``, the compiled schema's ``is_valid`` and
``_digested``, and the key is hashed without ``_key``'s call; 35 once the committed observation's
labels take their text kept per tuple of labels (no two list comprehensions) and ``Runtime.call``
answers its one observation without ``_closing.answered`` and ``ended_by_close`` while the
runtime is open; room for one."""


def _calls_of(n: int, first: int) -> tuple[Counter[str], list[Any]]:
    rt = Runtime("memory://", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return 3

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name="put", input_schema=schema, fn=put, effect="write", blocking=False)
    run = rt.new_run()
    calls: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and PACKAGE_DIR in code.co_filename:
            calls[code.co_qualname] += 1

    with rt:
        for i in range(40):  # the name resolved, the entry built
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        out = []
        gc.collect()
        sys.setprofile(profile)
        try:
            for i in range(first, first + n):
                call = ToolCall(name="put", arguments={"key": f"k{i}", "value": i})
                out.append(rt.call(call, run_id=run, node_id=f"n{i}"))
        finally:
            sys.setprofile(None)
    return calls, out


def test_a_new_write_from_sync_code_makes_a_short_chain_of_python_calls() -> None:
    small, first = _calls_of(20, 0)
    large, second = _calls_of(120, 1000)
    assert [(o.status, o.data) for o in first + second] == [("ok", 3)] * 140
    per_call = (sum(large.values()) - sum(small.values())) / 100
    assert per_call <= BUDGET, (per_call, (large - small).most_common())
