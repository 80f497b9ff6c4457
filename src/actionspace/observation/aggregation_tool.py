"""Register an aggregation over a paged tool as a tool of its own, so a model can ask "how many".

The registered tool takes the paged tool's arguments (minus the cursor), walks every page through
the runtime under the same bounds as :func:`~actionspace.observation.aggregate.aggregate`, and
returns only the reduced figures, ``complete=False`` (with the cursor to resume from) when a bound
stopped the walk. It needs the same scopes as the paged tool, so it never widens what a
principal may read; its pages are traced in their own run, named in the result's diagnostics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from actionspace.catalog.registry import Catalog
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ToolError
from actionspace.observation.aggregate import PagingRuntime, Reducer, aggregate
from actionspace.outcomes import ToolResult

__all__ = ["RegisteringRuntime", "aggregation_tool"]


class RegisteringRuntime(PagingRuntime, Protocol):
    """A :class:`PagingRuntime` that also registers tools (:class:`actionspace.Runtime` is one)."""

    @property
    def catalog(self) -> Catalog: ...

    def add_tool(
        self, *, name: str, input_schema: Mapping[str, Any], fn: Callable[..., Any], **spec: Any
    ) -> ToolSpec: ...


def aggregation_tool(
    rt: RegisteringRuntime,
    *,
    name: str,
    over: str,
    reducer: Reducer | Sequence[Reducer],
    max_pages: int,
    max_items: int,
    description: str = "",
    cursor_arg: str = "cursor",
) -> ToolSpec:
    """Register ``name``: the aggregation of the paged tool ``over`` (which must be registered)."""
    paged = rt.catalog.get(over)
    schema = dict(paged.input_schema)
    properties = {k: v for k, v in schema.get("properties", {}).items() if k != cursor_arg}
    schema["properties"] = properties
    schema["required"] = [r for r in schema.get("required", []) if r != cursor_arg]

    def run(**arguments: Any) -> ToolResult:
        walk_run = f"{name}:{uuid.uuid4().hex[:12]}"
        result = aggregate(
            rt,
            {"name": over, "arguments": arguments},
            reducer=reducer,
            max_pages=max_pages,
            max_items=max_items,
            run_id=walk_run,
            cursor_arg=cursor_arg,
        )
        if result.status == "error" and result.error is not None:
            raise ToolError(result.error.category, result.error.message, details={"pages_run": walk_run})
        return ToolResult(
            data={**(result.data or {}), "pages_run": walk_run},
            complete=result.complete,
            cursor=result.cursor,
            total=result.total,
        )

    return rt.add_tool(
        name=name,
        input_schema=schema,
        fn=run,
        effect="read",
        reads=paged.reads,
        scopes=paged.scopes,
        description=description or f"Aggregate {over} over every page (at most {max_pages} pages).",
        labels=paged.labels,
    )
