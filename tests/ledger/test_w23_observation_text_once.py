"""A durable write's committed observation reaches the SQLite ledger with its JSON made once.

- The write frame makes the ledger's JSON of an ``int`` result's observation beside the mapping
  (``ledger.entries.Encoded``); the store's ``to_json`` writes that text instead of encoding the
  mapping again: a durable call runs the JSON encoder once (its arguments), where it ran it twice.
- What is stored is byte for byte what encoding the mapping writes: the rows of generated calls
  (node ids and tool names outside ASCII, large and negative results) read back and encoded again
  give the same text; the text made from its parts equals ``strict_dumps`` of the mapping over
  generated parts, and is not made (the store encodes) for a part outside ASCII.
- An ``Encoded`` mapping is an ordinary mapping to every store: the memory store answers it equal
  to the one the SQLite store reads back.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actionspace import Runtime, ToolCall
from actionspace._canonical import strict_dumps
from actionspace.ledger import entries
from actionspace.ledger.entries import LedgerEntry
from actionspace.ledger.memory import MemoryLedgerStore
from actionspace.ledger.sqlite import SqliteLedgerStore, from_json, to_json
from actionspace.pipeline import _write_parts

_ENCODER = strict_dumps.__code__
"""The C encoder's Python wrapper (every ``strict_dumps`` and ``dumps_plain`` call runs it)."""


def _runtime(path: Path, tool: str = "put", result: int = 3) -> tuple[Runtime, str]:
    rt = Runtime(f"sqlite:///{path}", recover_on_start=False)

    def put(key: str, value: int) -> int:
        return result

    schema = {"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}}
    rt.add_tool(name=tool, input_schema=schema, fn=put, effect="write", blocking=False)
    return rt, rt.new_run()


def _observations(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [text for (text,) in db.execute("SELECT observation FROM ledger_entries ORDER BY rowid")]
    finally:
        db.close()


def test_a_durable_call_runs_the_json_encoder_once(tmp_path: Path) -> None:
    rt, run = _runtime(tmp_path / "a.db")
    encodes = 0

    def spy(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal encodes
        if event == "call" and frame.f_code is _ENCODER:
            encodes += 1

    try:
        for i in range(5):  # the run's first calls make the tool's entry
            rt.call(ToolCall(name="put", arguments={"key": f"w{i}", "value": i}), run_id=run, node_id=f"w{i}")
        sys.setprofile(spy)
        try:
            for i in range(40):
                obs = rt.call(
                    ToolCall(name="put", arguments={"key": f"k{i}", "value": i}), run_id=run, node_id=f"n{i}"
                )
                assert (obs.status, obs.data) == ("ok", 3)
        finally:
            sys.setprofile(None)
        entry = rt.ledger.get_node(run, "n39")
    finally:
        rt.close()
    assert encodes == 40  # the arguments' text for the intent; the observation's was made beside it
    assert entry is not None and entry.state == "committed" and entry.observation is not None
    texts = _observations(tmp_path / "a.db")
    assert len(texts) == 45
    for text in texts:
        assert to_json(from_json(text)) == text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    node=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12),
    tool=st.sampled_from(["put", "écrire", "put_2"]),
    result=st.integers(min_value=-(2**62), max_value=2**62),
)
def test_the_stored_observation_is_what_encoding_it_writes(
    tmp_path_factory: Any, node: str, tool: str, result: int
) -> None:
    path = tmp_path_factory.mktemp("obs") / "a.db"
    rt, run = _runtime(path, tool, result)
    try:
        for i in range(3):
            obs = rt.call(
                ToolCall(name=tool, arguments={"key": node, "value": i}), run_id=run, node_id=f"{node}{i}"
            )
            assert (obs.status, obs.data) == ("ok", result), obs
        entry = rt.ledger.get_node(run, f"{node}2")
    finally:
        rt.close()
    assert entry is not None and entry.observation is not None
    assert entry.observation["data"] == result and entry.observation["call_id"] == f"{run}:{node}2"
    for text in _observations(path):
        assert to_json(from_json(text)) == text


_ascii = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=10)
_any = st.text(st.characters(blacklist_categories=["Cs"]), max_size=10)


class _Label:
    def __init__(self, integrity: str) -> None:
        self.integrity = integrity


@given(
    call_id=st.one_of(_ascii, _any),
    tool=_ascii,
    version=st.one_of(_ascii, _any),
    value=st.integers(),
    key=_ascii,
    digest=st.text("0123456789abcdef", min_size=64, max_size=64),
    now=st.floats(allow_nan=False, allow_infinity=False),
    trust=st.one_of(_ascii, _any),
    tags=st.lists(st.one_of(_ascii, _any), max_size=3),
)
def test_the_observation_text_is_strict_dumps_of_its_mapping(
    call_id: str,
    tool: str,
    version: str,
    value: int,
    key: str,
    digest: str,
    now: float,
    trust: str,
    tags: list[str],
) -> None:
    stored = _write_parts._LEDGER_OBSERVATION.copy()  # as int_observation fills it in
    stored["call_id"], stored["tool"], stored["tool_version"] = call_id, tool, version
    stored["data"], stored["effects"], stored["diagnostics"] = value, [], {"idempotency_key": key}
    stored["content_hash"], stored["items"] = digest, []
    stored["provenance"] = {
        "source": _write_parts._SOURCE,
        "fetched_at": now,
        "resource_version": None,
        "trust": trust,
        "labels": list(tags),
    }
    try:
        expected = strict_dumps(stored)
    except ValueError:  # an int too long to print: the encoder refuses it, and so does the text
        expected = None
    try:
        made = _write_parts._observation_text(
            call_id, tool, version, value, key, digest, now, _Label(trust), tags
        )
    except ValueError:
        made = None
    if expected is None or not expected.isascii():
        assert made is None
    else:
        assert made == expected == to_json(stored)
        encoded = entries.Encoded(stored)
        encoded.text = made
        assert to_json(encoded) == expected


def test_an_encoded_observation_is_a_mapping_to_every_store(tmp_path: Path) -> None:
    observation = entries.Encoded({"call_id": "r:n", "status": "ok", "data": 3, "items": []})
    observation.text = strict_dumps(dict(observation))
    begun = LedgerEntry(
        key="as1_" + "0" * 32, run_id="r", node_id="n", tool="t@1", args_digest="d", arguments={"a": 1}
    )
    memory, sqlite = MemoryLedgerStore(), SqliteLedgerStore(tmp_path / "l.db")
    try:
        answers = []
        for store in (memory, sqlite):
            sent = begun.evolve(state="dispatched", attempts=1)
            assert store.begin(sent).created
            done = sent.evolve(state="committed", observation=observation)
            assert store.transition(sent.key, ["dispatched"], done) is not None
            stored = store.get(sent.key)
            assert stored is not None
            answers.append(stored.to_dict()["observation"])
        assert answers[0] == answers[1] == dict(observation)
    finally:
        sqlite.close()
        memory.close()
    assert _observations(tmp_path / "l.db") == [observation.text]
