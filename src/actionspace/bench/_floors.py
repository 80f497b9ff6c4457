"""Physical floors: what a call costs with no framework at all, to read every other row against."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypedDict

from actionspace.bench._timing import Pass
from actionspace.bench._workload import (
    ARGS_DICTS,
    ARGS_JSON,
    BATCH,
    EXPECTED,
    VARIANTS,
    add,
    add_async,
    openai_calls,
    slow,
)

__all__ = ["run_floors"]


# typing_extensions' TypedDict: pydantic rejects typing's before Python 3.12.
class _AddArgs(TypedDict):
    a: int
    b: int


class _AddModel(BaseModel):
    a: int
    b: int


def _same(value: Any) -> Any:
    return value


def _sync_floors(p: Pass) -> None:
    p.sync("direct.sync_tool", lambda i: add(1 + i, 2), 20000, extract=_same, expect=EXPECTED)

    adapter = TypeAdapter(_AddArgs)
    p.sync(
        "pydantic_validate.typeadapter_dict",
        lambda i: add(**adapter.validate_python(ARGS_DICTS[i % VARIANTS])),
        20000,
        extract=_same,
        expect=EXPECTED,
    )
    encoded = [s.encode() for s in ARGS_JSON]
    p.sync(
        "pydantic_validate.typeadapter_json",
        lambda i: add(**adapter.validate_json(encoded[i % VARIANTS])),
        20000,
        extract=_same,
        expect=EXPECTED,
    )

    def via_model(i: int) -> int:
        m = _AddModel.model_validate(ARGS_DICTS[i % VARIANTS])
        return add(m.a, m.b)

    p.sync("pydantic_validate.basemodel_dict", via_model, 20000, extract=_same, expect=EXPECTED)

    calls = openai_calls("add")

    def parse(i: int) -> Any:
        call = json.loads(calls[i % VARIANTS])
        return json.loads(call["function"]["arguments"])

    p.sync("json_parse.openai_call", parse, 20000, extract=_same, expect={"a": 1, "b": 2})


async def _async_floors(p: Pass) -> None:
    async def awaited(i: int) -> int:
        return await add_async(1 + i, 2)

    await p.aio("direct.async_tool", awaited, 20000, extract=_same, expect=EXPECTED)

    async def to_thread(i: int) -> int:
        return await asyncio.to_thread(add, 1 + i, 2)

    await p.aio("direct.sync_tool_to_thread", to_thread, 20000, extract=_same, expect=EXPECTED)

    async def gather() -> list[int]:
        return await asyncio.gather(*(slow(i) for i in range(BATCH)))

    await p.abatch("batch.direct.asyncio_gather", gather)


def run_floors(p: Pass) -> None:
    """Direct calls, pydantic validation and JSON parsing of the same arguments."""
    from actionspace.bench._durable import run_durable_floor

    _sync_floors(p)
    asyncio.run(_async_floors(p))
    run_durable_floor(p)
