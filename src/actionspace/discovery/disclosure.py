"""Progressive disclosure: names, one-line purposes and risk first; the full definition on demand.

In a run offered with ``disclosure=True`` the model first sees :func:`short_definition` of each
tool. Asking for one (``rt.describe(name, run_id=...)`` by the host, or the ``describe_tool`` tool
by the model) returns :func:`full_definition` — input schema, output schema, examples — and
records a ``described`` event. A tool never described in the run cannot be called: the call is
``unknown_tool`` with the recovery ``describe_tool``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from actionspace._canonical import json_copy
from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ActionError, UnknownToolError
from actionspace.validation.validator import ValidationContext

__all__ = [
    "DESCRIBE_RECOVERY",
    "DESCRIBE_TOOL",
    "describe_event",
    "describe_tool",
    "described_spec",
    "full_definition",
    "short_definition",
    "undescribed",
]

DESCRIBE_TOOL: Final = "describe_tool"
"""Name of the tool the model calls to read a full definition."""

DESCRIBE_RECOVERY: Final = ("describe_tool", "choose_offered_tool")
"""Recovery of a call to an offered tool that was never described in the run."""

_DESCRIBE_BYTES: Final = 262_144
"""Observation budget of a definition, in bytes: a schema is never trimmed mid-way."""


def short_definition(spec: ToolSpec) -> dict[str, Any]:
    """What a disclosure-mode offer shows: name, one-line summary, effect and risk."""
    return {
        "name": spec.name,
        "version": spec.version,
        "summary": spec.summary or spec.name,
        "effect": spec.effect,
        "risk": spec.risk,
        "reversible": spec.reversible,
    }


def full_definition(spec: ToolSpec) -> dict[str, Any]:
    """Everything the model may know of a tool: ``ToolSpec.describe()`` plus summary, examples,
    output schema and reversibility (no implementation details)."""
    out = spec.describe()
    out["summary"] = spec.summary
    out["reversible"] = spec.reversible
    out["examples"] = [json_copy(e) for e in spec.examples]
    if spec.output_schema is not None:
        out["output_schema"] = json_copy(spec.output_schema)
    return out


def describe_event(spec: ToolSpec, *, via: str) -> dict[str, Any]:
    """The ``described`` trace payload; ``via`` is ``"host"`` (rt.describe) or ``"model"`` (the tool)."""
    return {"tool": spec.name, "version": spec.version, "schema_hash": spec.schema_hash, "via": via}


def described_spec(lookup: Callable[[str], ToolSpec | None], run: Any, name: str) -> ToolSpec:
    """The version of ``name`` offered to ``run``, marked as described there.

    ``lookup(name@version)`` finds a spec (``Catalog.find``). Raises UnknownToolError when the run
    was offered no such tool (or another version of it).
    """
    base, _, asked = name.partition("@")
    pin = run.pins.get(base)
    if pin is None or (asked and asked != pin[0]):
        raise UnknownToolError(f"no tool {name!r} is offered to run {getattr(run, 'run_id', '?')}")
    spec = lookup(f"{base}@{pin[0]}")
    if spec is None or spec.lifecycle == "retired":
        raise UnknownToolError(f"{base}@{pin[0]} as offered to this run is no longer available")
    run.described.add(base)
    return spec


def undescribed(run: Any, name: str) -> ActionError | None:
    """``unknown_tool`` for an offered tool not yet described in a disclosure run, else None."""
    base = name.partition("@")[0]
    if base in run.described or base not in run.pins:
        return None
    return ActionError.of(
        "unknown_tool",
        f"{base!r} is offered but its definition has not been read in this run; "
        f"call {DESCRIBE_TOOL} with tool={base!r} first",
        recovery=DESCRIBE_RECOVERY,
        alternatives=(DESCRIBE_TOOL,),
        details={"tool": base, "describe_with": DESCRIBE_TOOL, "offered": sorted(run.pins)[:50]},
    )


def describe_tool(
    lookup: Callable[[str], ToolSpec | None],
    runs: Callable[[str], Any],
    record: Callable[[str, str, Mapping[str, Any]], None],
) -> ToolSpec:
    """The ``describe_tool`` tool: ``{"tool": name}`` → the full definition offered to the run.

    ``lookup`` is ``Catalog.find``; ``runs(run_id)`` the run's state (or None); ``record`` the
    runtime's ``record``. The argument is bound to the run's offered ``name@version`` (a tool not
    offered is ``invalid_arguments``); no scope is needed, since reading a definition changes nothing.
    """

    def bind(ctx: ValidationContext, value: Any) -> list[dict[str, str]]:
        run = runs(ctx.run_id)
        if run is None or not isinstance(value, str):
            return []
        try:
            spec = described_spec(lookup, run, value)
        except UnknownToolError:
            return []
        record(ctx.run_id, "described", describe_event(spec, via="model"))
        return [{"id": spec.key, "label": spec.name}]

    def describe(tool: str) -> dict[str, Any]:
        spec = lookup(tool)
        if spec is None:  # retired between binding and execution
            return {"name": tool, "error": "no longer available"}
        return full_definition(spec)

    return ToolSpec(
        name=DESCRIBE_TOOL,
        summary="Read the full definition (arguments, examples) of an offered tool before calling it.",
        description="Read the full definition (input schema, output schema, examples) of an offered "
        "tool. A tool must be described in the run before it can be called.",
        input_schema={
            "type": "object",
            "properties": {"tool": {"type": "string", "description": "Name of an offered tool."}},
            "required": ["tool"],
            "additionalProperties": False,
        },
        effect="none",
        scopes=(),
        bindings={"tool": bind},
        fn=describe,
        max_observation_bytes=_DESCRIBE_BYTES,
        examples=({"tool": "create_event"},),
    )
