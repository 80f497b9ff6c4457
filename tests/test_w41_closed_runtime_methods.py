"""Every public method of a closed Runtime is refused up front with ConfigurationError, found by
introspection so that a method added later is covered too."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actionspace import Runtime
from actionspace.catalog import ToolSpec
from actionspace.errors import ConfigurationError
from actionspace.plan.environments import SqliteEnvironment

EXEMPT = {"close": "idempotent by contract: closing a closed runtime does nothing"}


def _public_methods() -> list[str]:
    return sorted(
        name
        for name, member in vars(Runtime).items()
        if not name.startswith("_") and inspect.isfunction(member) and name not in EXEMPT
    )


def _uses(rt: Runtime, run_id: str, tmp_path: Path) -> dict[str, Callable[[], Any]]:
    def spec_fn(x: int) -> int:
        """Echo x."""
        return x

    spec = ToolSpec(name="other", input_schema={"type": "object"}, fn=spec_fn, effect="read")
    plan = {"nodes": [{"id": "a", "tool": "get", "arguments": {"x": 1}}]}
    raw = {"name": "get", "arguments": {"x": 1}}
    return {
        "tool": lambda: rt.tool(effect="read"),
        "add_tool": lambda: rt.add_tool(
            name="t2", input_schema={"type": "object"}, fn=spec_fn, effect="read"
        ),
        "register": lambda: rt.register(spec),
        "resource": lambda: rt.resource("doc", lambda _id: "v1"),
        "run_state": lambda: rt.run_state(run_id),
        "run_id_of": lambda: rt.run_id_of(run_id),
        "new_run": lambda: rt.new_run(run_id),
        "finish": lambda: rt.finish(run_id),
        "record": lambda: rt.record(run_id, "verified", {"ok": True}),
        "session": lambda: rt.session(run_id),
        "asession": lambda: asyncio.run(rt.asession(run_id)),
        "call_all": lambda: rt.call_all([raw], run_id=run_id),
        "call": lambda: rt.call(raw, run_id=run_id),
        "acall": lambda: asyncio.run(rt.acall(raw, run_id=run_id)),
        "acall_all": lambda: asyncio.run(rt.acall_all([raw], run_id=run_id)),
        "astream": lambda: rt.astream(raw, run_id=run_id),
        "user_input": lambda: rt.user_input(run_id, "hello"),
        "context_label": lambda: rt.context_label(run_id),
        "offer": lambda: rt.offer(run_id=run_id),
        "describe": lambda: rt.describe("get"),
        "environment": lambda: rt.environment("env", SqliteEnvironment(tmp_path / "env.db")),
        "arun_plan": lambda: asyncio.run(rt.arun_plan(plan, run_id=run_id)),
        "run_plan": lambda: rt.run_plan(plan, run_id=run_id),
        "budget": lambda: rt.budget(run_id=run_id),
        "estimate": lambda: rt.estimate(raw, run_id=run_id),
        "add_mcp_server": lambda: rt.add_mcp_server(object()),  # type: ignore[arg-type]
        "aadd_mcp_server": lambda: asyncio.run(rt.aadd_mcp_server(object())),  # type: ignore[arg-type]
        "recover": lambda: rt.recover(),
        "purge": lambda: rt.purge(),
        "resolve": lambda: rt.resolve("as1_" + "0" * 32, outcome="failed", by="ops", reason="checked"),
    }


@pytest.fixture(params=["memory", "sqlite"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'closed.db'}"


def test_every_public_method_of_a_closed_runtime_raises_that_it_is_closed(url: str, tmp_path: Path) -> None:
    rt = Runtime(url, recover_on_start=False)

    @rt.tool(effect="read")
    def get(x: int) -> int:
        """Read x."""
        return x

    run_id = rt.new_run()  # the run stays open in memory: its methods must still refuse
    rt.call({"name": "get", "arguments": {"x": 1}}, run_id=run_id)
    uses = _uses(rt, run_id, tmp_path)
    assert sorted(uses) == _public_methods(), "a public Runtime method is not exercised after close()"
    tools_before = sorted(spec.key for spec in rt.catalog)
    rt.close()
    for name, use in uses.items():
        with pytest.raises(ConfigurationError, match="closed"):
            use()
            pytest.fail(f"Runtime.{name} did not raise after close()")
    assert sorted(spec.key for spec in rt.catalog) == tools_before  # nothing registered after close


def test_close_stays_harmless_on_a_closed_runtime(url: str) -> None:
    rt = Runtime(url, recover_on_start=False)
    rt.close()
    rt.close()
    rt.close(wait=True)
