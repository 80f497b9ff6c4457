"""The full output of a trimmed result is readable by the process that continues the run.

A run continued in another process offers ``read_artifact`` for the artifacts its model was
shown (the run's saved state names them). On a PostgreSQL store the artifacts were kept in the
memory of the process that shaped the result, so the next one answered "no artifact is stored"
and the output was lost with the first process; they are now stored in PostgreSQL, beside the
run's state (on SQLite they are in a folder beside the file, as before).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from actionspace import Runtime
from tests.pg import fresh_schema
from tests.proc import run_child
from tests.proc import url as url  # the fixture

FACT = "ERROR: disk quota exceeded on /var/build"

_FIRST = textwrap.dedent(
    """
    import json, sys
    from actionspace import Runtime

    rt = Runtime(sys.argv[1], recover_on_start=False)

    @rt.tool(effect="read")
    def fetch_log() -> str:
        "Fetch the build log."
        steps = "\\n".join(f"step {i}: ok" for i in range(40000))
        return steps + "\\nERROR: disk quota exceeded on /var/build"

    s = rt.session(run_id="conv", provider="openai_chat")
    s.user("why did the build fail?")
    s.tools()
    call = {"id": "c1", "type": "function", "function": {"name": "fetch_log", "arguments": "{}"}}
    obs = s.handle({"role": "assistant", "content": None, "tool_calls": [call]}).observations[0]
    rt.close()
    print(json.dumps({"ref": obs.artifact_ref, "complete": obs.complete}), flush=True)
    """
)


def _read(ref: str, offset: int, length: int) -> dict[str, Any]:
    arguments = json.dumps({"ref": ref, "offset": offset, "length": length})
    call = {"id": "c2", "type": "function", "function": {"name": "read_artifact", "arguments": arguments}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def test_an_artifact_shown_in_one_process_is_read_in_the_next(url: str) -> None:
    shown = run_child(_FIRST, url)
    assert shown["complete"] is False and shown["ref"].startswith("artifact://sha256/")

    rt = Runtime(url, recover_on_start=False)
    try:
        session = rt.session(run_id="conv", provider="openai_chat")
        assert "read_artifact" in [t["function"]["name"] for t in session.tools()]
        first = session.handle(_read(shown["ref"], 0, 100)).observations[0]
        assert first.ok, first.error
        assert first.data["text"].startswith('"step 0: ok') and first.data["total_bytes"] > 400_000
        last = session.handle(_read(shown["ref"], first.data["total_bytes"] - 200, 200)).observations[0]
        assert last.ok, last.error
        assert FACT in last.data["text"] and last.data["eof"] is True
    finally:
        rt.close()


@pytest.fixture
def pg(pg_url: str) -> Iterator[str]:
    yield from fresh_schema(pg_url)


def test_the_postgres_artifact_store_reads_any_range_of_what_any_process_stored(pg: str) -> None:
    from actionspace.pipeline._pg_artifacts import CHUNK, PostgresArtifactStore

    blob = bytes(range(256)) * ((2 * CHUNK + 123) // 256) + b"tail"
    written, read = PostgresArtifactStore(pg), PostgresArtifactStore(pg)  # two pools: two writers
    try:
        pieces = [blob[i : i + 70_001] for i in range(0, len(blob), 70_001)]
        ref = written.put_stream(pieces)
        assert read.put(blob) == ref  # the same bytes again: the same reference, kept once
        assert read.exists(ref) and read.get(ref) == blob
        with read.open(ref) as stream:
            for offset in (0, CHUNK - 3, CHUNK, 2 * CHUNK - 1, len(blob) - 4):
                stream.seek(offset)
                assert stream.read(10) == blob[offset : offset + 10]
            assert stream.seek(0, 2) == len(blob)
        missing = "artifact://sha256/" + "0" * 64
        assert not read.exists(missing) and not read.exists("not a ref")
        with pytest.raises(KeyError):
            read.get(missing)
        with pytest.raises(ValueError):
            read.get("artifact://md5/abc")
    finally:
        written.close()
        read.close()
