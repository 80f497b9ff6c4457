from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from actionspace.observation import MemoryArtifactStore, canonical_bytes, shape


def size(data: Any) -> int:
    return len(canonical_bytes(data))


def test_a_long_list_keeps_its_first_items_and_counts_the_rest() -> None:
    shaped = shape(list(range(10_000)), max_bytes=1024)
    *kept, marker = shaped.data
    assert kept == list(range(len(kept)))
    assert marker == {"_omitted_items": 10_000 - len(kept)}
    assert not shaped.complete
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == size(list(range(10_000)))
    assert shaped.trimming.kept_bytes == size(shaped.data) <= 1024


def test_a_long_string_keeps_head_and_tail_and_says_how_much_is_gone() -> None:
    text = "START" + "a" * 50_000 + "END"
    data = shape(text, max_bytes=2048).data
    match = re.fullmatch(r"(STARTa*)…\[(\d+) chars omitted\]…(a*END)", data)
    assert match is not None
    assert len(match[1]) + int(match[2]) + len(match[3]) == len(text)
    assert size(data) <= 2048
    assert size(data) > 2000


def test_top_level_fields_survive_when_their_values_are_cut() -> None:
    rows = [{"id": n, "name": f"customer {n}", "notes": "x" * 500, "tags": ["a", "b"]} for n in range(500)]
    shaped = shape({"total": 500, "next_cursor": "c-500", "rows": rows}, max_bytes=4096)
    data = shaped.data
    assert data["total"] == 500
    assert data["next_cursor"] == "c-500"
    assert data["rows"][0]["id"] == 0
    assert data["rows"][-1] == {"_omitted_items": 500 - (len(data["rows"]) - 1)}
    assert "chars omitted" in data["rows"][0]["notes"]


def test_deep_nesting_collapses_below_the_depth_cap() -> None:
    value: Any = {"leaf": "x" * 1000}
    for level in range(60):
        value = {f"level{level}": value, "pad": "y" * 100}
    data = shape(value, max_bytes=512).data
    text = json.dumps(data)
    assert "_omitted_keys" in text
    assert size(data) <= 512
    assert "level59" in data


def test_objects_with_many_keys_keep_the_first_in_order() -> None:
    value = {f"k{n:04d}": n for n in range(5000)}
    data = shape(value, max_bytes=1024).data
    kept = [k for k in data if k != "_omitted_keys"]
    assert kept == [f"k{n:04d}" for n in range(len(kept))]
    assert data["_omitted_keys"] == 5000 - len(kept)


def test_the_same_value_always_shapes_to_the_same_data_and_hash() -> None:
    value = {"rows": [{"n": n, "s": "z" * n} for n in range(300)]}
    first, second = shape(value, max_bytes=2048), shape(value, max_bytes=2048)
    assert first.data == second.data
    assert first.content_hash == second.content_hash


def test_the_cut_value_is_stored_whole() -> None:
    store = MemoryArtifactStore()
    value = {"rows": list(range(5000))}
    shaped = shape(value, max_bytes=512, artifacts=store)
    assert shaped.artifact_ref is not None
    assert json.loads(store.get(shaped.artifact_ref)) == value


def test_a_text_stream_keeps_its_head_and_tail() -> None:
    def lines() -> Iterator[str]:
        for n in range(100_000):
            yield f"row {n}\n"

    shaped = shape(lines(), max_bytes=1024)
    assert isinstance(shaped.data, str)
    assert shaped.data.startswith("row 0\nrow 1\n")
    assert shaped.data.endswith("row 99999\n")
    assert "chars omitted]…" in shaped.data
    assert shaped.trimming is not None
    assert shaped.trimming.original_bytes == sum(len(f"row {n}\n") for n in range(100_000))


def test_a_short_text_stream_is_whole_and_untrimmed() -> None:
    shaped = shape(iter(["hello ", "world"]))
    assert shaped.data == "hello world"
    assert shaped.complete
    assert shaped.trimming is None


def test_bytes_holding_json_are_shaped_as_json() -> None:
    assert shape(b'{"ok": true, "n": [1, 2]}').data == {"ok": True, "n": [1, 2]}
    assert shape(b"plain text").data == "plain text"
