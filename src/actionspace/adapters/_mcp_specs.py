"""From an MCP ``Tool`` to a ToolSpec: effect and risk from annotations, trust, result values.

MCP tool annotations are hints the specification says to treat as untrusted. They are mapped
only for an allowlisted server. For any other server every tool gets the defaults the spec gives
for missing hints (not read-only, destructive, open-world: ``effect="external"``, ``risk="high"``)
and ``requires_approval=True``, so a tool that merely *claims* ``readOnlyHint`` still goes
through the approval gate. MCP gives ``tools/call`` no idempotency key: every tool is
``idempotency="none"``, so a write whose answer is lost ends in ``unknown_commit``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema_rs
import mcp_types as types

from actionspace._canonical import digest_json
from actionspace.catalog.spec import Effect, Integrity, Labels, Risk, ToolSpec
from actionspace.errors import ToolDefinitionError

__all__ = [
    "Mapped",
    "check_self_contained",
    "content_value",
    "fingerprint",
    "map_annotations",
    "name_shape",
    "result_text",
    "unambiguous",
    "unusable_name",
]

MAX_NAME = 128
"""Longest tool name taken from a server (the MCP specification's bound)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Mapped:
    """What the runtime takes from a tool's annotations (or their absence)."""

    effect: Effect
    risk: Risk
    reversible: bool
    labels: Labels
    requires_approval: bool


def map_annotations(annotations: types.ToolAnnotations | None, *, trusted: bool) -> Mapped:
    """Effect, risk, labels and the approval rule for one tool of a trusted or untrusted server.

    Trusted: ``readOnlyHint`` → ``read`` / low; otherwise ``openWorldHint`` (default true) →
    ``external`` / high; else ``destructiveHint`` (default true) → ``write`` / high, or ``write`` /
    medium when false. Open-world output is ``untrusted``. Untrusted servers: the hints are ignored.
    """
    hints = annotations if trusted and annotations is not None else types.ToolAnnotations()
    read_only = bool(hints.read_only_hint)
    open_world = hints.open_world_hint is not False
    destructive = hints.destructive_hint is not False
    effect: Effect
    risk: Risk
    if read_only:
        effect, risk = "read", "low"
    elif open_world:
        effect, risk = "external", "high"
    else:
        effect, risk = "write", "high" if destructive else "medium"
    integrity: Integrity = "untrusted" if open_world or not trusted else "trusted"
    return Mapped(
        effect=effect,
        risk=risk,
        reversible=read_only,
        labels=Labels(integrity=integrity),
        requires_approval=not trusted,
    )


def unusable_name(name: str) -> str | None:
    """Why a server's tool name is not taken (None: it is): it must be 1..128 printable ASCII
    characters without spaces. Anything else could pass for another tool when read (a Cyrillic
    letter, a zero-width or right-to-left mark) or break the listing it is shown in (a line break)."""
    if not 0 < len(name) <= MAX_NAME:
        return f"a tool name must have 1..{MAX_NAME} characters, this one has {len(name)}"
    if not name.isascii() or not name.isprintable() or any(c.isspace() for c in name):
        return f"the tool name {name!a} holds spaces, control or non-ASCII characters"
    return None


_PUNCTUATION = re.compile(r"[^0-9a-z]")


def name_shape(name: str) -> str:
    """What a name reads as: lower case, every other character than a letter or digit an ``_``. Two
    names of one shape (``read.artifact``, ``Read_Artifact``) read as one to a model, and a framework
    that maps names to its provider's alphabet may turn them into one."""
    return _PUNCTUATION.sub("_", name.lower())


def unambiguous(tools: list[types.Tool]) -> tuple[list[tuple[types.Tool, str]], dict[str, str]]:
    """Each listed tool once, with its fingerprint; and why the others are left out: a name listed
    twice with different definitions (which one the server would run is unknown), or names of one
    :func:`name_shape` (which one a model means is unknown): all of that group, whatever the order."""
    digests: dict[str, str] = {}
    unique: list[tuple[types.Tool, str]] = []
    ambiguous: dict[str, str] = {}
    for tool in tools:
        digest = fingerprint(tool)
        if tool.name not in digests:
            digests[tool.name] = digest
            unique.append((tool, digest))
        elif digests[tool.name] != digest:
            ambiguous[tool.name] = "listed more than once, with different definitions"
    shapes: dict[str, list[str]] = {}
    for name in digests:
        shapes.setdefault(name_shape(name), []).append(name)
    for group in (g for g in shapes.values() if len(g) > 1):
        for name in group:
            alike = ", ".join(repr(n[:40]) for n in group[:5] if n != name)
            ambiguous.setdefault(name, f"its name differs only in case or punctuation from {alike}")
    return [(tool, digest) for tool, digest in unique if tool.name not in ambiguous], ambiguous


_KNOWN_MOST = 8192
"""Most fingerprints kept by the digest of the tool's listed form (about 100 bytes each)."""
_known: dict[bytes, str] = {}
"""SHA-256 of a tool as listed → its fingerprint: a listing that repeats a tool (every listing, for a
server whose tools did not change) costs a hash of it, not its canonical form (0.2 ms for a small
tool). Emptied when full; a dict's single get and set need no lock."""


def fingerprint(tool: types.Tool) -> str:
    """What identifies one version of a tool: its schemas, description, title and annotations
    (everything of it a model is shown: a change of any is a new version, never a silent swap)."""
    listed = hashlib.sha256(tool.model_dump_json(by_alias=True).encode()).digest()
    known = _known.get(listed)
    if known is None:
        known = _fingerprint(tool)
        if len(_known) >= _KNOWN_MOST:
            _known.clear()
        _known[listed] = known
    return known


def _fingerprint(tool: types.Tool) -> str:
    shape = {
        "description": tool.description or "",
        "title": tool.title or "",
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": tool.annotations.model_dump(mode="json", exclude_none=True)
        if tool.annotations
        else None,
    }
    try:
        encoded = digest_json(shape)
    except ValueError:  # NaN or an infinity (``1e400`` is valid JSON): the tool is skipped later
        encoded = b"j" + json.dumps(shape, sort_keys=True, default=str).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]  # int64 bounds too


def check_self_contained(spec: ToolSpec) -> None:
    """Raise ToolDefinitionError unless both schemas of ``spec`` compile with nothing fetched.

    A server's schema is untrusted input: a ``$ref`` (or ``$schema``, or a relative ``$ref``
    under an ``$id``) naming ``http://…`` or ``file://…`` must not make this process read a
    URL or a local file. An output schema that does not compile is refused too: the SDK checks
    every result against it, so each call would run and then fail.
    """
    for what, schema in (("input_schema", spec.input_schema), ("output_schema", spec.output_schema)):
        if schema is None:
            continue
        try:
            jsonschema_rs.validator_for(dict(schema), offline=True)
        except ValueError as exc:  # jsonschema_rs.ValidationError is one
            raise ToolDefinitionError(
                f"{spec.key}: {what} is not a self-contained JSON Schema: {exc}"
            ) from exc


def result_text(result: types.CallToolResult) -> str:
    """The text blocks of a result, joined (what an ``isError`` result says to the model)."""
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def content_value(result: types.CallToolResult) -> Any:
    """The observation data of a successful result.

    Structured content when the server sent it (it matches the tool's output schema); else the
    text of a single text block; else one dict per content block (binary data is left out,
    with its size, so a picture never floods the model's context).
    """
    if result.structured_content is not None:
        return result.structured_content
    blocks = result.content
    if len(blocks) == 1 and isinstance(blocks[0], types.TextContent):
        return blocks[0].text
    return [_block(b) for b in blocks]


def _block(block: Any) -> Mapping[str, Any]:
    data: dict[str, Any] = block.model_dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(block, types.ImageContent | types.AudioContent):
        raw = data.pop("data", "")
        data["bytes"] = len(raw) * 3 // 4
    elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
        resource = data["resource"]
        resource["bytes"] = len(resource.pop("blob", "")) * 3 // 4
    return data
