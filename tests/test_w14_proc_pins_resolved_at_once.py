"""Two processes each resolve a different tool for the first time in one run at the same time
(no offer: a run pins each tool at its first call). Both pins are kept: a later call of either
tool runs the version the run first resolved, even after a newer version is registered.

Before, the process whose save lost the race merged the other's snapshot by keeping its own pins
whole (they had changed since its last save), so the tool the other process pinned was dropped
from the run; and when it lost twice, the second merge took the stored pins and dropped its own.
The run then resolved that tool again at its next call: to the newer version, silently.

The other processes are real ones: each pins its tool and saves exactly while this process is
between its read of the run's state and its own save (its store's save runs them first).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actionspace import Runtime
from tests.proc import run_child
from tests.proc import url as url  # the fixture

_TOOLS = textwrap.dedent(
    """
    def add_tools(rt, newer=False):
        for name in ("fx", "gx", "hx"):
            rt.add_tool(
                name=name, version="1", fn=lambda amount, name=name: f"{name}@1 {amount}", effect="read",
                description=f"{name}: an amount in dollars.",
                input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}},
            )
            if newer:  # the same schema, another meaning: only the run's pin tells them apart
                rt.add_tool(
                    name=name, version="2", fn=lambda amount, name=name: f"{name}@2 {amount}", effect="read",
                    description=f"{name}: an amount in cents.",
                    input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}},
                )
    """
)

_PIN = _TOOLS + textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime
    rt = Runtime(sys.argv[1], recover_on_start=False)
    add_tools(rt)
    obs = rt.call({"name": sys.argv[2], "arguments": {"amount": 5}}, run_id="conv")
    assert obs.ok and obs.tool_version == "1", obs
    rt.close()
    print(json.dumps({"pinned": sys.argv[2]}), flush=True)
    """
)


def _runtime(url: str, *, newer: bool = False) -> Runtime:
    rt = Runtime(url, recover_on_start=False)
    scope: dict[str, Any] = {}
    exec(_TOOLS, scope)  # the very tools the other processes have
    scope["add_tools"](rt, newer)
    return rt


def _pin_elsewhere(url: str, tool: str) -> None:
    assert run_child(_PIN, url, tool) == {"pinned": tool}


def test_tools_first_resolved_in_two_processes_at_once_keep_both_pins(url: str) -> None:
    _race(url, ["fx"])


def test_a_save_that_loses_twice_keeps_its_own_pin_and_both_others(tmp_path: Path) -> None:
    _race(f"sqlite:///{tmp_path / 'run.db'}", ["fx", "hx"])  # the merge is the stores' alike


def _race(url: str, others: list[str]) -> None:
    """Pin ``gx`` here while the processes pinning ``others`` save first, one at each attempt."""
    rt = _runtime(url)
    try:
        assert rt.call({"name": "fx", "arguments": {"amount": 0}}, run_id="warm").ok
        store = rt.engine.runs.run_states
        save = store.save
        pending = list(others)

        def save_after_the_others(run_id: str, state: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
            if run_id == "conv" and pending and "gx" in state["pins"]:
                _pin_elsewhere(url, pending.pop(0))  # another process pins its tool first
            return save(run_id, state, *args, **kwargs)

        store.save = save_after_the_others  # type: ignore[method-assign]
        obs = rt.call({"name": "gx", "arguments": {"amount": 5}}, run_id="conv")
        assert obs.ok and obs.tool_version == "1", obs
        assert pending == []
    finally:
        rt.close()

    later = _runtime(url, newer=True)  # version 2 of every tool is registered: the run keeps 1
    try:
        assert sorted(later.engine.run("conv").pins) == sorted({"gx", *others})
        for tool in ("gx", *others):
            obs = later.call({"name": tool, "arguments": {"amount": 5}}, run_id="conv")
            assert obs.ok and obs.data == f"{tool}@1 5", obs
    finally:
        later.close()
