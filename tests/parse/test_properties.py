"""``parse`` never raises, whatever it is given, and never returns a nameless call without an error."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from actionspace.parse import ParseResult, parse
from tests.parse import samples

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=25,
)
SHAPE_KEYS = st.sampled_from(
    [
        "name", "arguments", "parameters", "args", "input", "id", "call_id", "type", "function", "role",
        "content", "tool_calls", "function_call", "choices", "message", "output", "summary", "text",
        "thinking", "jsonrpc", "method", "params", "custom", "reasoning_content",
    ]
)  # fmt: skip
SHAPE_LEAVES = st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from(
    ["function", "tool_use", "function_call", "message", "assistant", "user", "tools/call", "text",
     "thinking", "reasoning", "output_text", "custom", "{}", '{"a": 1}', "{bad", "[1]", "<tool_call>"]
)  # fmt: skip
PROVIDER_SHAPES = st.recursive(
    SHAPE_LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SHAPE_KEYS, inner, max_size=6),
    max_leaves=30,
)
TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"properties": {"days": {"type": "integer"}}}},
    }
]


def check(result: Any) -> None:
    assert isinstance(result, ParseResult)
    if result.error is not None:
        assert result.error.category == "parse_error", result.error
        assert result.error.details["reason"]
        return
    for call in result.calls:
        assert isinstance(call.name, str)
        assert call.name


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_arbitrary_json_values_and_their_text_never_raise(value: Any) -> None:
    check(parse(value))
    check(parse(json.dumps(value)))


@settings(max_examples=300, deadline=None)
@given(PROVIDER_SHAPES)
def test_objects_shaped_like_provider_payloads_never_raise(value: Any) -> None:
    check(parse(value, TOOLS))
    check(parse(json.dumps(value), TOOLS))


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_text_never_raises(text: str) -> None:
    check(parse(text, TOOLS))


@settings(max_examples=300, deadline=None)
@given(st.binary())
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    check(parse(data))


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(sorted(samples.TEXT_SAMPLES)), st.data())
def test_every_truncation_of_every_valid_sample_never_raises(name: str, data: st.DataObject) -> None:
    text = samples.TEXT_SAMPLES[name]
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    check(parse(text[:cut], TOOLS))
    check(parse(text[:cut].encode(), TOOLS))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(samples.TEXT_SAMPLES)), st.data())
def test_noise_spliced_into_valid_samples_never_raises(name: str, data: st.DataObject) -> None:
    text = samples.TEXT_SAMPLES[name]
    at = data.draw(st.integers(min_value=0, max_value=len(text)))
    noise = data.draw(st.text(alphabet='{}[]()<>|"\\:;,=`\n ' + "abc", max_size=4))
    check(parse(text[:at] + noise + text[at:], TOOLS))


def test_every_valid_sample_parses_without_error() -> None:
    for name, text in samples.TEXT_SAMPLES.items():
        result = parse(text, TOOLS)
        assert result.error is None, (name, result.error)
        assert result.calls or name in ("plain", "harmony_final"), name


def test_every_prefix_of_every_sample_never_raises() -> None:
    for text in samples.TEXT_SAMPLES.values():
        for cut in range(len(text) + 1):
            check(parse(text[:cut], TOOLS))
