"""A plain tool that returns an iterator (a generator function is a streaming tool, which has its
own path): its output is read within the tool's timeout and a size bound, then the iterator is
closed; what it raises midway is the tool's failure, typed as any exception of the tool's, never
``internal``."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

from actionspace import Runtime

SCHEMA = {"type": "object"}


def test_an_iterator_that_never_ends_is_cut_at_the_tools_timeout_and_closed() -> None:
    rt = Runtime("memory://")
    closed: list[bool] = []

    def endless() -> Iterator[str]:
        try:
            for i in itertools.count():
                yield f"{i}\n"
        finally:
            closed.append(True)

    rt.add_tool(
        name="tail", fn=lambda: endless(), input_schema=SCHEMA, effect="read", timeout_s=0.5, description="d"
    )
    began = time.monotonic()
    obs = rt.call({"name": "tail", "arguments": {}})
    took = time.monotonic() - began
    assert obs.status == "ok" and obs.complete is False
    assert "did not end" in obs.diagnostics["cut"] and "timeout" in obs.diagnostics["cut"]
    assert took < 5, took
    assert closed == [True]
    assert obs.data.startswith("0\n1\n2\n")


def test_an_iterator_that_raises_midway_is_the_tools_failure_not_ours() -> None:
    rt = Runtime("memory://")

    def chunks() -> Iterator[str]:
        yield "a"
        yield "b"
        raise ConnectionResetError("the feed dropped")

    rt.add_tool(name="feed", fn=lambda: chunks(), input_schema=SCHEMA, effect="read", description="d")
    obs = rt.call({"name": "feed", "arguments": {}})
    assert obs.error is not None and obs.error.category != "internal"
    assert obs.error.vendor_code == "ConnectionResetError"


def test_an_iterator_that_ends_is_read_whole() -> None:
    rt = Runtime("memory://")
    rt.add_tool(
        name="lines",
        fn=lambda: (f"line {i}\n" for i in range(3)),
        input_schema=SCHEMA,
        effect="read",
        description="d",
    )
    obs = rt.call({"name": "lines", "arguments": {}})
    assert obs.status == "ok" and obs.complete and obs.data == "line 0\nline 1\nline 2\n"
    assert "cut" not in obs.diagnostics
