"""The ``read_artifact`` tool: byte ranges of a trimmed result's full output, errors as ToolErrors."""

from __future__ import annotations

from typing import Any

import pytest

from actionspace.discovery import READ_ARTIFACT, read_artifact_tool
from actionspace.errors import ToolError
from actionspace.observation import MemoryArtifactStore


def _read(store: MemoryArtifactStore, **arguments: Any) -> dict[str, Any]:
    spec = read_artifact_tool(store)
    assert spec.fn is not None
    result: dict[str, Any] = spec.fn(**arguments)
    return result


def test_the_tool_is_a_governed_read_with_bounded_arguments() -> None:
    spec = read_artifact_tool(MemoryArtifactStore())
    assert spec.name == READ_ARTIFACT == "read_artifact"
    assert spec.effect == "read" and spec.scopes == ("read:read_artifact",)
    assert spec.labels.integrity == "untrusted"
    props = spec.input_schema["properties"]
    assert props["ref"]["pattern"] == "^artifact://"
    assert (props["offset"]["minimum"], props["offset"]["default"]) == (0, 0)
    assert (props["length"]["minimum"], props["length"]["maximum"], props["length"]["default"]) == (
        1,
        65_536,
        8192,
    )
    assert spec.input_schema["required"] == ["ref"]


def test_read_artifact_reads_a_range_and_reports_eof() -> None:
    store = MemoryArtifactStore()
    ref = store.put(b"0123456789" * 3)
    first = _read(store, ref=ref, offset=5, length=10)
    assert first == {
        "ref": ref,
        "offset": 5,
        "length": 10,
        "text": "5678901234",
        "total_bytes": 30,
        "eof": False,
    }
    last = _read(store, ref=ref, offset=25, length=10)
    assert last == {"ref": ref, "offset": 25, "length": 5, "text": "56789", "total_bytes": 30, "eof": True}
    beyond = _read(store, ref=ref, offset=40)
    assert (beyond["text"], beyond["length"], beyond["eof"]) == ("", 0, True)
    assert _read(store, ref=ref)["text"] == "0123456789" * 3  # default: from 0, 8192 bytes


def test_a_character_cut_by_the_range_starts_the_next_read() -> None:
    store = MemoryArtifactStore()
    ref = store.put("añb€c".encode())  # a, ñ (2 bytes), b, € (3 bytes), c: 8 bytes
    texts, offset = [], 0
    while True:
        part = _read(store, ref=ref, offset=offset, length=3)
        texts.append(part["text"])
        offset += part["length"]
        if part["eof"]:
            break
    assert "".join(texts) == "añb€c"
    assert _read(store, ref=ref, offset=4, length=1)["text"] == "\ufffd"  # only part of the €


def test_invalid_utf8_is_replaced_not_raised() -> None:
    store = MemoryArtifactStore()
    ref = store.put(b"ok \xff\xfe end")
    assert _read(store, ref=ref)["text"] == "ok \ufffd\ufffd end"


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"ref": "artifact://sha256/" + "0" * 64}, "/ref"),  # well formed, never stored
        ({"ref": "artifact://nonsense"}, "/ref"),
        ({"ref": "file:///etc/passwd"}, "/ref"),
        ({"ref": "artifact://sha256/" + "0" * 64, "offset": -1}, "/offset"),
        ({"ref": "artifact://sha256/" + "0" * 64, "length": 0}, "/length"),
        ({"ref": "artifact://sha256/" + "0" * 64, "length": 65_537}, "/length"),
    ],
)
def test_an_unknown_ref_or_a_bad_range_is_invalid_arguments(arguments: dict[str, Any], path: str) -> None:
    with pytest.raises(ToolError) as caught:
        _read(MemoryArtifactStore(), **arguments)
    error = caught.value.error
    assert error.category == "invalid_arguments"
    assert error.recovery == ("change_arguments",)
    assert [f.path for f in error.field_errors] == [path]
