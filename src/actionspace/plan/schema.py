"""The published JSON Schema of a plan (``actionspace plan schema``): what a model is asked to emit."""

from __future__ import annotations

from typing import Any

__all__ = ["PLAN_SCHEMA"]

_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_REF: dict[str, Any] = {
    "type": "object",
    "description": (
        'A value taken from another node\'s final observation, e.g. {"$ref": "n1.data.items[0].id"}.'
    ),
    "properties": {"$ref": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_\-]*(\.|\[)"}},
    "required": ["$ref"],
    "additionalProperties": False,
}

_TEMPLATE: dict[str, Any] = {
    "type": "object",
    "description": (
        "A string built from other nodes' final observations, e.g. "
        '{"$template": "My GPA is {n1.data.gpa}"}; {{ and }} are literal braces.'
    ),
    "properties": {"$template": {"type": "string"}},
    "required": ["$template"],
    "additionalProperties": False,
}

PLAN_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://actionspace.dev/schemas/plan-1.json",
    "title": "actionspace plan",
    "description": (
        "A DAG of tool calls. Nodes without a path between them may run in parallel; the runtime adds an "
        "edge wherever two nodes touch the same resource and one of them writes it, and rejects a plan whose "
        "independent_of claim is false."
    ),
    "type": "object",
    "properties": {
        "nodes": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 128},
                    "tool": {
                        "type": "string",
                        "description": "An offered tool name (optionally name@version).",
                    },
                    "arguments": {
                        "type": "object",
                        "description": (
                            'The tool\'s arguments; any value may be a {"$ref": ...} or a {"$template": ...} '
                            "object."
                        ),
                        "$comment": "Reference objects follow #/$defs/ref, templates #/$defs/template.",
                    },
                    "depends_on": {
                        **_STRINGS,
                        "description": "Nodes that must end ok before this one starts.",
                    },
                    "reads": {**_STRINGS, "description": "Narrow or widen the tool's read templates."},
                    "writes": {
                        **_STRINGS,
                        "description": "Narrow the tool's write templates (never hide one).",
                    },
                    "independent_of": {
                        **_STRINGS,
                        "description": "A claim that this node commutes with those.",
                    },
                    "first_of": {
                        "type": "array",
                        "minItems": 1,
                        "description": "Speculation: read-only alternatives; the first sufficient one wins.",
                        "items": {
                            "type": "object",
                            "properties": {"tool": {"type": "string"}, "arguments": {"type": "object"}},
                            "required": ["tool"],
                            "additionalProperties": False,
                        },
                    },
                    "cost_cap": {"type": "number", "minimum": 0},
                    "provenance": {"type": "object", "additionalProperties": {"type": "string"}},
                    "description": {"type": "string"},
                },
                "required": ["id"],
                "oneOf": [{"required": ["tool"]}, {"required": ["first_of"]}],
                "additionalProperties": False,
            },
        },
        "max_concurrency": {"type": "integer", "minimum": 1},
    },
    "required": ["nodes"],
    "additionalProperties": False,
    "$defs": {"ref": _REF, "template": _TEMPLATE},
}
