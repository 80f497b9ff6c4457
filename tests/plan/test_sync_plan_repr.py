"""The sync form of a plan never renders its result as text.

``asyncio.Runner`` puts back the interrupt handler it replaced when it ends, and the standard
library names that handler in a string it builds and throws away: the handler refers to the
main task, and the task to its result. When the result was the plan's, every observation of the
plan was rendered each time ``Runtime.run_plan`` returned (0.1 s for 8,000 nodes).
"""

from __future__ import annotations

from typing import Any

import pytest

from actionspace import Runtime
from actionspace.plan.model import PlanResult


def test_run_plan_does_not_render_its_result(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Runtime("memory://", recover_on_start=False)

    @rt.tool(effect="none")
    def add(a: int, b: int = 1) -> int:
        return a + b

    rendered: list[int] = []
    plain = PlanResult.__repr__

    def counted(self: PlanResult) -> str:
        rendered.append(len(self.nodes))
        return plain(self)

    monkeypatch.setattr(PlanResult, "__repr__", counted)
    nodes: list[dict[str, Any]] = [{"id": f"n{i}", "tool": "add", "arguments": {"a": i}} for i in range(50)]
    result = rt.run_plan({"nodes": nodes})
    assert result.status == "ok" and result.nodes["n49"].data == 50
    assert rendered == []
    repr(result)
    assert rendered == [50]  # repr itself is still there when asked
