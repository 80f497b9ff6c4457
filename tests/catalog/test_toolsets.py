"""The toolsets a runtime opened register their tools in it once and close together, in order."""

from __future__ import annotations

import asyncio

from actionspace.catalog.toolsets import Toolsets


class _Toolset:
    def __init__(self, name: str, log: list[tuple[str, ...]]) -> None:
        self.name = name
        self.log = log

    def register(self, rt: object) -> None:
        self.log.append(("register", self.name, str(rt)))

    async def aregister(self, rt: object) -> None:
        self.log.append(("aregister", self.name, str(rt)))

    def close(self) -> None:
        self.log.append(("close", self.name))


class _Source:
    def __init__(self, toolset: _Toolset) -> None:
        self._toolset = toolset

    def toolset(self) -> _Toolset:
        return self._toolset


def test_toolsets_register_in_the_runtime_and_close_once_in_the_order_they_were_opened() -> None:
    log: list[tuple[str, ...]] = []
    toolsets = Toolsets("rt")
    first = toolsets.add(_Source(_Toolset("a", log)))
    second = asyncio.run(toolsets.aadd(_Source(_Toolset("b", log))))
    toolsets.close()
    toolsets.close()
    assert (first.name, second.name) == ("a", "b")
    assert log == [("register", "a", "rt"), ("aregister", "b", "rt"), ("close", "a"), ("close", "b")]
