"""A ``patternProperties`` pattern is matched against argument keys the model wrote: as the
schema's own validator matches it (ECMA-262, in bounded time), never by a backtracking engine a
key crafted against a pattern such as ``^(a+)+$`` would hold for hours."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actionspace import Runtime
from actionspace.errors import ConfigurationError
from tests.proc import run_child

NESTED = "^(a+)+$"
"""Backtracks exponentially on ``aaaa…!`` in Python's ``re``; linear in the validator's engine."""

CHILD = """
import json, sys
from actionspace import Runtime

key, root, nested = sys.argv[1], sys.argv[2], sys.argv[3]
rt = Runtime("memory://")
got = []
marks = {
    "integer": {"type": "integer"},
    "date_time": {"type": "string", "format": "date-time"},
    "path": {"type": "string", "x-actionspace": {"type": "path", "root": root}},
}
out = {}
for mark, sub in marks.items():
    schema = {"type": "object", "patternProperties": {nested: sub}, "additionalProperties": True}
    rt.add_tool(name=mark, input_schema=schema, fn=lambda **kw: got.append(kw), effect="read")
    value = 7.0 if mark == "integer" else "2024-01-01T10:00:00Z"
    obs = rt.call({"name": mark, "arguments": {key: value}})
    out[mark] = [obs.status, obs.error and obs.error.category, repr(got[-1][key]) if got else None]
print(json.dumps(out))
"""


def test_a_key_crafted_to_backtrack_against_a_pattern_property_is_read_in_bounded_time(
    tmp_path: Path,
) -> None:
    # 2**64 paths for a backtracking engine: only a matcher in bounded time answers before the deadline
    key = "a" * 64 + "!"
    out = run_child(CHILD, key, str(tmp_path), NESTED, deadline_s=60)
    # the key does not match, so no mark applies: the value reaches the tool as written
    assert out == {
        "integer": ["ok", None, "7.0"],
        "date_time": ["ok", None, repr("2024-01-01T10:00:00Z")],
        "path": ["ok", None, repr("2024-01-01T10:00:00Z")],
    }


def _integer_tool() -> tuple[Runtime, list[dict[str, Any]]]:
    rt = Runtime("memory://")
    got: list[dict[str, Any]] = []
    schema = {
        "type": "object",
        "patternProperties": {NESTED: {"type": "integer"}},
        "additionalProperties": {"type": "number"},
    }
    rt.add_tool(name="t", input_schema=schema, fn=lambda **kw: got.append(kw), effect="read")
    return rt, got


@settings(max_examples=150, deadline=None)
@given(key=st.text(alphabet="ab\n\r!", max_size=10))
@example(key="a\n")
@example(key="aaa")
def test_a_pattern_property_governs_exactly_the_keys_the_schema_validator_matches(key: str) -> None:
    # ECMA-262 ``$`` ends the text; Python's ``$`` also matches before a final newline: a key
    # ``"a\\n"`` is no integer property to the validator, so its number must reach the tool as written
    rt, got = _integer_tool()
    obs = rt.call({"name": "t", "arguments": {key: 7.0}})
    assert obs.status == "ok", obs.error
    received = got[-1][key]
    matches = key != "" and set(key) == {"a"}
    assert type(received) is (int if matches else float), (key, received)
    assert received == 7


def test_a_pattern_the_validator_cannot_read_is_refused_when_the_tool_is_registered() -> None:
    rt = Runtime("memory://")
    schema = {"type": "object", "patternProperties": {"((": {"type": "integer"}}}
    with pytest.raises(ConfigurationError, match=re.escape("((")):
        rt.add_tool(name="t", input_schema=schema, fn=lambda **kw: None, effect="read")
