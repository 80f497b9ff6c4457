"""The governed ``read_artifact`` tool: a byte range of a trimmed result's full output.

A trimmed observation carries ``artifact_ref`` (``artifact://sha256/<hex>``) and its rendering
tells the model to call ``read_artifact(ref, offset, length)`` for the rest. The tool is an
ordinary read tool: it is offered, validated, authorized (scope ``read:read_artifact``) and
traced like any other, and its output is labelled untrusted (raw output may hold anything).
"""

from __future__ import annotations

import codecs
import io
from typing import Any, Final

from actionspace.catalog.spec import Labels, ToolSpec
from actionspace.errors import FieldError, ToolError
from actionspace.observation import ARTIFACT_SCHEME, ArtifactStore

__all__ = ["DEFAULT_READ_LENGTH", "MAX_READ_LENGTH", "READ_ARTIFACT", "read_artifact_tool"]

READ_ARTIFACT: Final = "read_artifact"
"""Name of the tool the model calls to read more of a trimmed result."""

DEFAULT_READ_LENGTH: Final = 8192
"""Bytes read when the call gives no ``length``."""

MAX_READ_LENGTH: Final = 65_536
"""Most bytes one call may read."""

_OBSERVATION_BYTES: Final = 6 * MAX_READ_LENGTH + 1024
"""Observation budget: a full read never gets trimmed again, even if every byte is JSON-escaped."""

_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "ref": {
            "type": "string",
            "pattern": "^artifact://",
            "description": "The artifact_ref of a trimmed result.",
        },
        "offset": {"type": "integer", "minimum": 0, "default": 0, "description": "First byte to read."},
        "length": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_READ_LENGTH,
            "default": DEFAULT_READ_LENGTH,
            "description": "How many bytes to read.",
        },
    },
    "required": ["ref"],
    "additionalProperties": False,
}


def read_artifact_tool(artifacts: ArtifactStore) -> ToolSpec:
    """The ``read_artifact`` tool over ``artifacts``: ``{ref, offset=0, length=8192}`` → a range.

    Returns ``{"ref", "offset", "length", "text", "total_bytes", "eof"}``: ``length`` is the bytes
    actually read (a UTF-8 character cut by the range is left for the next read, so
    ``offset + length`` is where to continue); ``text`` is them decoded as UTF-8 with
    replacement characters for invalid bytes. An unknown or malformed ``ref``, or an argument out
    of range, raises ``ToolError("invalid_arguments")`` with a field error on it.
    """

    def read_artifact(ref: str, offset: int = 0, length: int = DEFAULT_READ_LENGTH) -> dict[str, Any]:
        _check(ref, offset, length)
        try:
            stream = artifacts.open(ref)
        except (KeyError, ValueError) as exc:
            raise _invalid("/ref", f"no artifact {ref[:120]!r} is stored") from exc
        with stream:
            total = stream.seek(0, io.SEEK_END)
            stream.seek(min(offset, total))
            chunk = stream.read(length)
        return _range(ref, offset, chunk, total)

    return ToolSpec(
        name=READ_ARTIFACT,
        summary="Read more of a trimmed result: a byte range of its full output (its artifact_ref).",
        description="Read a byte range of the full output of a trimmed result, by the result's "
        "artifact_ref. Continue at offset + length until eof is true.",
        input_schema=_SCHEMA,
        effect="read",
        labels=Labels(integrity="untrusted"),
        fn=read_artifact,
        max_observation_bytes=_OBSERVATION_BYTES,
        examples=({"ref": ARTIFACT_SCHEME + "0" * 64, "offset": 0, "length": DEFAULT_READ_LENGTH},),
    )


def _check(ref: Any, offset: Any, length: Any) -> None:
    if not isinstance(ref, str) or not ref.startswith("artifact://"):
        raise _invalid("/ref", "must be an artifact reference, artifact://sha256/<hex>")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise _invalid("/offset", "must be an integer >= 0")
    if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= MAX_READ_LENGTH:
        raise _invalid("/length", f"must be an integer from 1 to {MAX_READ_LENGTH}")


def _invalid(path: str, message: str) -> ToolError:
    return ToolError(
        "invalid_arguments", f"{path[1:]}: {message}", field_errors=(FieldError(path=path, message=message),)
    )


def _range(ref: str, offset: int, chunk: bytes, total: int) -> dict[str, Any]:
    eof = offset + len(chunk) >= total
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(chunk, final=eof)
    pending = len(decoder.getstate()[0])
    if pending and pending < len(chunk):
        chunk = chunk[: len(chunk) - pending]  # the cut character starts the next read
    elif pending:
        text = decoder.decode(b"", final=True)  # the range holds nothing but part of one character
    return {
        "ref": ref,
        "offset": offset,
        "length": len(chunk),
        "text": text,
        "total_bytes": total,
        "eof": eof,
    }
